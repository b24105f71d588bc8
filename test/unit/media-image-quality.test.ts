/**
 * Image quality (D55 encodings) and the measurable annotations (D51 image shape; D54).
 */
import sharp from 'sharp';
import { annotateAudio, annotateImage, annotateVideo, extractKeyframes } from '../../shared/media/annotate-image';
import { analyzeImage, blurScoreFromVariance } from '../../shared/media/image-quality';
import { readAudioInfo } from '../../shared/media/audio-info';
import { audioFixtures, blocksImage, blurred, detailedJpeg, flatImage, hasFfmpeg, videoFixtures } from '../fixtures/media';

const FFMPEG = hasFfmpeg();
const itAv = it; // ffmpeg is a prerequisite (README): without it these fail rather than skip
if (!FFMPEG) console.warn('ffmpeg not found: audio/video annotation tests are skipped');

const rgb = (hex: string) => [1, 3, 5].map((i) => parseInt(hex.slice(i, i + 2), 16)) as [number, number, number];
const dist = (a: string, b: string) => Math.hypot(...rgb(a).map((v, i) => v - rgb(b)[i]!));

let detailed: Buffer;
beforeAll(async () => {
  detailed = await detailedJpeg(800, 600);
});

describe('D55 blur_score (0..1, higher = blurrier)', () => {
  it('orders a sharp image above its blurred copies', async () => {
    const sharpQ = await analyzeImage(detailed);
    const soft = await analyzeImage(await blurred(detailed, 1.5));
    const veryBlurred = await analyzeImage(await blurred(detailed, 6));
    expect(sharpQ.blur_score).toBeLessThan(soft.blur_score);
    expect(soft.blur_score).toBeLessThan(veryBlurred.blur_score);
    expect(sharpQ.blur_score).toBeLessThan(0.3);
    expect(veryBlurred.blur_score).toBeGreaterThan(0.85);
  });

  it('without the palette (what the local scorer asks for): the same measurements, no palette fields', async () => {
    const full = await analyzeImage(detailed);
    const rated = await analyzeImage(detailed, { palette: false });
    const { palette, color_palette, elapsed_ms, ...measures } = full;
    expect(palette.length).toBeGreaterThan(0);
    expect({ ...rated, elapsed_ms: 0 }).toEqual({ ...measures, elapsed_ms: 0 });
    expect(rated).not.toHaveProperty('palette');
    expect(rated).not.toHaveProperty('color_palette');
    void color_palette;
    void elapsed_ms;
  });

  it('is a monotonic map of the Laplacian variance into 0..1', () => {
    expect(blurScoreFromVariance(0)).toBe(1);
    expect(blurScoreFromVariance(100)).toBe(0.5);
    expect(blurScoreFromVariance(750)).toBeLessThan(blurScoreFromVariance(3));
  });
});

describe('D55 exposure and noise_level', () => {
  it('well_exposed detailed scene; a darkened copy underexposed; a brightened copy overexposed', async () => {
    expect((await analyzeImage(detailed)).exposure).toBe('well_exposed');
    expect((await analyzeImage(await sharp(detailed).linear(0.25, 0).jpeg().toBuffer())).exposure).toBe('underexposed');
    expect((await analyzeImage(await sharp(detailed).linear(1, 150).jpeg().toBuffer())).exposure).toBe('overexposed');
  });

  it('noise_level rises from a clean flat image to one with heavy added noise', async () => {
    const clean = await analyzeImage(await flatImage(400, 300, '#808080'));
    const noisyRaw = Buffer.alloc(400 * 300);
    let s = 1;
    for (let i = 0; i < noisyRaw.length; i++) {
      s = (s * 1103515245 + 12345) >>> 0;
      noisyRaw[i] = 128 + (((s >>> 16) % 61) - 30);
    }
    const noisy = await analyzeImage(await sharp(noisyRaw, { raw: { width: 400, height: 300, channels: 1 } }).png().toBuffer());
    expect(clean.noise_level).toBe('low');
    expect(noisy.noise_level).toBe('high');
  });
});

describe('colour palette', () => {
  it('finds the drawn colours, most frequent first, as #rrggbb', async () => {
    const q = await analyzeImage(await blocksImage());
    for (const drawn of ['#e02020', '#2040d0', '#20a040', '#f0d020']) {
      expect(q.color_palette.some((c) => dist(c, drawn) < 20)).toBe(true);
    }
    expect(q.color_palette.length).toBeLessThanOrEqual(6);
    expect(q.color_palette.every((c) => /^#[0-9a-f]{6}$/.test(c))).toBe(true);
    const shares = q.palette.map((p) => p.share);
    expect([...shares].sort((a, b) => b - a)).toEqual(shares);
  });

  it('a flat single-colour image has one palette colour, zero entropy and no edges', async () => {
    const q = await analyzeImage(await flatImage(300, 200, '#336699'));
    expect(q.color_palette).toEqual(['#336699']);
    expect(q.entropy).toBe(0);
    expect(q.edge_density).toBe(0);
    expect(q.blur_score).toBe(1);
  });
});

describe('D51 image annotations', () => {
  it('has type, width/height of the stored bytes, palette, quality_metrics and the model-derived fields in the spec shape', async () => {
    const a = await annotateImage(detailed);
    expect(a).toMatchObject({ type: 'image', width: 800, height: 600, quality_metrics: { exposure: 'well_exposed' } });
    expect(a.quality_metrics.blur_score).toBeGreaterThanOrEqual(0);
    expect(a.quality_metrics.blur_score).toBeLessThanOrEqual(1);
    expect(['low', 'medium', 'high']).toContain(a.quality_metrics.noise_level);
    expect(a.color_palette.length).toBeGreaterThan(1);
    expect(Array.isArray(a.objects)).toBe(true);
    expect(a.text_extraction).toMatchObject({ full_text: expect.any(String), words: expect.any(Array) });
    expect(typeof a.face_count).toBe('number');
    expect(a.safety).toMatchObject({ nsfw_score: expect.any(Number), pii_detected: expect.any(Boolean) });
  });
});

describe('audio / video annotations (measured fields)', () => {
  itAv('audio: duration, channels, sample_rate, codec, loudness; silence detected', async () => {
    const wav = audioFixtures.wav(1);
    expect((await readAudioInfo(wav, 'audio/wav')).duration_seconds).toBe(1); // music-metadata itself
    const a = await annotateAudio(wav, 'audio/wav');
    expect(a).toMatchObject({ type: 'audio', duration_seconds: 1, channels: 2, sample_rate: 44100, silent: false, transcript: null });
    expect(a.mean_volume_db).toBeLessThan(0);
    expect((await annotateAudio(audioFixtures.silentWav(1), 'audio/wav')).silent).toBe(true);
  });

  itAv('video: dimensions, fps, codec, duration; keyframes at 25/50/75 % as PNG', async () => {
    const mp4 = videoFixtures.mp4(2);
    const v = await annotateVideo(mp4);
    expect(v).toMatchObject({ type: 'video', width: 320, height: 240, fps: 15, codec: 'h264', has_audio: true });
    const kf = await extractKeyframes(mp4, v.duration_seconds!);
    expect(kf.map((k) => k.index)).toEqual([0, 1, 2]);
    expect(kf.map((k) => k.timestamp_seconds)).toEqual([0.5, 1, 1.5].map((t) => expect.closeTo(t, 1)));
    expect(kf[0]).toMatchObject({ width: 320, height: 240 });
    expect(kf[0]!.png.subarray(1, 4).toString('latin1')).toBe('PNG');
  });
});
