/**
 * measure() (File fields from the bytes, D30/D55), EXIF capture time with its offset, device
 * fields, GPS, and GPS → worker_region by offline reverse geocoding (D30).
 */
import { createHash } from 'node:crypto';
import sharp from 'sharp';
import { measure } from '../../shared/media/metadata';
import { exifDateToIso } from '../../shared/media/exif';
import { createRegionLookup, regionCodeFor, regionDataAvailable, workerRegion, type FeatureCollection } from '../../shared/media/region';
import { audioFixtures, hasFfmpeg, videoFixtures } from '../fixtures/media';

const FFMPEG = hasFfmpeg();
const itAv = it; // ffmpeg is a prerequisite (README): without it these fail rather than skip
if (!FFMPEG) console.warn('ffmpeg not found: audio/video measurement tests are skipped');

/** JPEG with EXIF as a phone writes it: Paris GPS (48°51'30.24"N 2°17'40.2"E), +02:00 offset. */
async function parisPhoto(offset: string | null = '+02:00'): Promise<Buffer> {
  return sharp({ create: { width: 640, height: 480, channels: 3, background: '#8090a0' } })
    .jpeg()
    .withExif({
      IFD0: { Make: 'Apple', Model: 'iPhone 15', Software: '17.4.1' },
      IFD2: { DateTimeOriginal: '2024:05:17 10:11:12', ...(offset ? { OffsetTimeOriginal: offset } : {}) },
      IFD3: { GPSLatitudeRef: 'N', GPSLatitude: '48/1 51/1 3024/100', GPSLongitudeRef: 'E', GPSLongitude: '2/1 17/1 4020/100' },
    })
    .toBuffer();
}

describe('measure() on images', () => {
  it('D30 content_hash is sha256:<hex> of the bytes; size and dimensions are the stored bytes\'', async () => {
    const bytes = await parisPhoto();
    const md = await measure(bytes, 'image/jpeg');
    expect(md.content_hash).toBe(`sha256:${createHash('sha256').update(bytes).digest('hex')}`);
    expect(md).toMatchObject({ content_type: 'image/jpeg', size_bytes: bytes.length, width: 640, height: 480, duration_seconds: null, detected_content_type: 'image/jpeg' });
  });

  it('D2: EXIF captured_at (local time and its offset) is the instant in UTC with milliseconds; device fields, GPS', async () => {
    const md = await measure(await parisPhoto(), 'image/jpeg', { app_version: '2.3.1' });
    expect(md.captured_at).toBe('2024-05-17T08:11:12.000Z');
    expect(md.device_model).toBe('Apple iPhone 15');
    expect(md.device_os).toBe('17.4.1');
    expect(md.app_version).toBe('2.3.1');
    expect(md.latitude).toBeCloseTo(48.8584, 4);
    expect(md.longitude).toBeCloseTo(2.2945, 4);
  });

  it("D2: an EXIF time with no offset names no instant: captured_at is null, or the worker app's time in UTC", async () => {
    const zoneless = await parisPhoto(null);
    expect((await measure(zoneless, 'image/jpeg')).captured_at).toBeNull();
    expect((await measure(zoneless, 'image/jpeg', { captured_at: '2024-05-17T10:11:12+05:30' })).captured_at).toBe('2024-05-17T04:41:12.000Z');
  });

  it('no EXIF → captured_at, device and GPS null (or the worker app\'s values, D24)', async () => {
    const plain = await sharp({ create: { width: 10, height: 10, channels: 3, background: '#000' } }).png().toBuffer();
    const md = await measure(plain, 'image/png');
    expect(md).toMatchObject({ captured_at: null, device_model: null, device_os: null, app_version: null, latitude: null, longitude: null });
    const md2 = await measure(plain, 'image/png', { device_model: 'Pixel 8', latitude: 37.7749, longitude: -122.4194 });
    expect(md2).toMatchObject({ device_model: 'Pixel 8', latitude: 37.7749, longitude: -122.4194 });
  });

  it('EXIF date helpers: subseconds and offsets normalized; a date without offset stays local', () => {
    expect(exifDateToIso('2024:05:17 10:11:12', '-0530', '12')).toBe('2024-05-17T10:11:12.120-05:30');
    expect(exifDateToIso('2024:05:17 10:11:12')).toBe('2024-05-17T10:11:12');
    expect(exifDateToIso('0000:00:00 00:00:00', '+01:00')).toBeNull();
  });
});

describe('measure() on audio and video', () => {
  itAv('audio/mpeg, audio/wav, audio/mp4: duration (music-metadata), channels, sample rate', async () => {
    const mp3 = await measure(audioFixtures.mp3(2), 'audio/mpeg');
    expect(mp3.duration_seconds).toBeGreaterThan(1.9);
    expect(mp3.duration_seconds).toBeLessThan(2.2);
    expect(mp3).toMatchObject({ channels: 1, sample_rate: 44100 });
    const wav = await measure(audioFixtures.wav(1), 'audio/wav');
    expect(wav).toMatchObject({ duration_seconds: 1, channels: 2, sample_rate: 44100, detected_content_type: 'audio/wav' });
    const m4a = await measure(audioFixtures.m4a(1), 'audio/x-m4a');
    expect(m4a.content_type).toBe('audio/mp4');
    expect(m4a.duration_seconds).toBeCloseTo(1, 1);
    expect(m4a).toMatchObject({ has_video: false, detected_content_type: 'audio/mp4' });
  });

  itAv('video/mp4: width, height, duration, fps (ffprobe); declared audio/mp4 is caught on the whole file', async () => {
    const bytes = videoFixtures.mp4(2, false);
    const md = await measure(bytes, 'video/mp4');
    expect(md).toMatchObject({ width: 320, height: 240, fps: 15, has_video: true, has_audio: true, detected_content_type: 'video/mp4' });
    expect(md.duration_seconds).toBeCloseTo(2, 0);
    const asAudio = await measure(bytes, 'audio/mp4');
    expect(asAudio.detected_content_type).toBe('video/mp4');
  });
});

describe('D30 worker_region by offline reverse geocoding', () => {
  // Rule logic on a tiny hand-made FeatureCollection: always runs.
  const square = (x0: number, y0: number, x1: number, y1: number) => [[[x0, y0], [x1, y0], [x1, y1], [x0, y1], [x0, y0]]];
  const fc: FeatureCollection = {
    features: [
      { properties: { iso_a2: 'FR', iso_3166_2: 'FR-75', region_cod: 'FR-IDF' }, geometry: { type: 'Polygon', coordinates: square(2.2, 48.8, 2.5, 48.95) } },
      { properties: { iso_a2: 'US', iso_3166_2: 'US-CA' }, geometry: { type: 'MultiPolygon', coordinates: [square(-124, 32, -114, 42)] } },
      { properties: { iso_a2: 'MC', iso_3166_2: 'MC~' }, geometry: { type: 'Polygon', coordinates: square(7.4, 43.72, 7.44, 43.76) } },
    ],
  };
  const lookup = createRegionLookup(fc);

  it('prefers the first-level ISO region (region_cod), then iso_3166_2, then the country', () => {
    expect(lookup(48.8584, 2.2945)?.region).toBe('FR-IDF');
    expect(lookup(37.7749, -122.4194)?.region).toBe('US-CA');
    expect(lookup(43.7383, 7.4254)?.region).toBe('MC');
    expect(regionCodeFor({ iso_a2: '-1' })).toBeNull();
  });

  it('open sea is null; a point just off a coast takes the nearest polygon within 0.25°', () => {
    expect(lookup(0, -30)).toBeNull();
    expect(lookup(48.96, 2.3)).toMatchObject({ region: 'FR-IDF', match: 'nearest' });
  });

  it('no GPS → null', async () => {
    expect(await workerRegion(null, null)).toBeNull();
  });

  // Real Natural Earth polygons: the committed data set (scripts/build-region-data.ts).
  it('the region data set ships with the code', () => {
    expect(regionDataAvailable()).toBe(true);
  });

  it('EXIF GPS of a Paris photo → FR-IDF; San Francisco → US-CA; Berlin → DE-BE; mid-Atlantic → null (D30)', async () => {
    const md = await measure(await parisPhoto(), 'image/jpeg');
    expect(await workerRegion(md.latitude, md.longitude)).toBe('FR-IDF');
    expect(await workerRegion(37.7749, -122.4194)).toBe('US-CA');
    expect(await workerRegion(52.52, 13.405)).toBe('DE-BE');
    expect(await workerRegion(30, -40)).toBeNull();
  });
});
