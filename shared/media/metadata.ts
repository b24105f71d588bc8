/**
 * measure(): the File fields that come from the bytes (spec "File"; D30, D55).
 *
 * - size_bytes, content_hash (`sha256:<hex>`, D30; D26 duplicate detection is the caller's, by this hash)
 * - width/height: sharp for images (the stored bytes' dimensions, not rotated by EXIF Orientation,
 *   D55; animated GIF/WebP: one frame), ffprobe for video.
 * - duration_seconds: music-metadata for audio (ffprobe fills what it misses), ffprobe for video.
 * - channels / sample_rate / codec / fps where the format has them.
 * - captured_at: EXIF DateTimeOriginal (+ SubSecTimeOriginal) with OffsetTimeOriginal, read with
 *   exifr `reviveValues:false` (revival drops the offset). Without an offset tag, the offset is
 *   derived from the GPS UTC timestamp when present, else the time is returned without offset
 *   (a local time of unknown zone). Falls back to CreateDate/OffsetTimeDigitized. Videos: the
 *   QuickTime `com.apple.quicktime.creationdate` tag (has an offset), else `creation_time` (UTC).
 *   null when absent.
 * - device_model ("Make Model", Make not repeated when Model already starts with it),
 *   device_os (EXIF Software), app_version (only when supplied by the worker's app, D24).
 * - latitude/longitude from EXIF GPS (exifr) or the QuickTime ISO 6709 location tag.
 * Values the worker's app sent with the upload (D24 multipart fields) fill what the bytes lack.
 */
import { createHash } from 'node:crypto';
import { createReadStream } from 'node:fs';
import { stat } from 'node:fs/promises';
import path from 'node:path';
import { categoryOf, normalizeContentType, type MediaCategory } from './sniff';
import { ffprobe, ffprobePath, num, parseRate, type ProbeResult } from './ffmpeg';
import { findPackageDir } from './native';

export interface MediaMetadata {
  content_type: string;
  category: MediaCategory | null;
  size_bytes: number;
  content_hash: string;
  /** As stored (EXIF orientation not applied). */
  width: number | null;
  height: number | null;
  /** An image's EXIF orientation (1–8; 5–8 swap the sides when shown upright), null when it has none. */
  orientation?: number | null;
  duration_seconds: number | null;
  channels: number | null;
  sample_rate: number | null;
  codec: string | null;
  fps: number | null;
  /** audio/mp4 vs video/mp4 settled on the whole file (null when not probed). */
  has_video: boolean | null;
  has_audio: boolean | null;
  /** The content type the whole file proves (differs from content_type → content_mismatch, D25). */
  detected_content_type: string | null;
  captured_at: string | null;
  device_model: string | null;
  device_os: string | null;
  app_version: string | null;
  latitude: number | null;
  longitude: number | null;
  /**
   * True when latitude/longitude are the worker app's declared position (the file carries none):
   * it may place a capture outside a job's radius, but it verifies nothing (D70).
   */
  location_declared?: boolean;
}

/** Optional values sent by the worker's app with the upload (D24). The bytes win when they have them. */
export interface MeasureOptions {
  captured_at?: string | null;
  device_model?: string | null;
  device_os?: string | null;
  app_version?: string | null;
  latitude?: number | null;
  longitude?: number | null;
}

export async function contentHash(input: Buffer | string): Promise<string> {
  const h = createHash('sha256');
  if (typeof input === 'string') {
    await new Promise<void>((resolve, reject) => {
      createReadStream(input)
        .on('data', (c) => h.update(c))
        .on('end', () => resolve())
        .on('error', reject);
    });
  } else h.update(input);
  return `sha256:${h.digest('hex')}`;
}

// ---------- EXIF ----------

const pad = (n: number, w = 2) => String(Math.abs(Math.trunc(n))).padStart(w, '0');

/** '+02:00', '-0530', '+2' → '+02:00'; null when not an offset. */
export function normalizeOffset(raw: unknown): string | null {
  if (typeof raw !== 'string') return null;
  const s = raw.trim();
  if (s === 'Z') return 'Z';
  const m = /^([+-])(\d{1,2}):?(\d{2})?$/.exec(s);
  if (!m) return null;
  const h = Number(m[2]);
  const mm = Number(m[3] ?? '0');
  if (h > 14 || mm > 59) return null;
  return `${m[1]}${pad(h)}:${pad(mm)}`;
}

/** EXIF 'YYYY:MM:DD HH:MM:SS' (+ subseconds, + offset) → ISO 8601; null when not a date. */
export function exifDateToIso(dateTime: unknown, offset?: unknown, subSec?: unknown): string | null {
  if (typeof dateTime !== 'string') return null;
  const m = /^(\d{4})[:-](\d{2})[:-](\d{2})[ T](\d{2}):(\d{2}):(\d{2})/.exec(dateTime.trim());
  if (!m || m[1] === '0000') return null;
  let frac = '';
  const ss = typeof subSec === 'string' || typeof subSec === 'number' ? String(subSec).trim() : '';
  if (/^\d+$/.test(ss)) frac = `.${ss.slice(0, 3).padEnd(3, '0')}`;
  const off = normalizeOffset(offset);
  return `${m[1]}-${m[2]}-${m[3]}T${m[4]}:${m[5]}:${m[6]}${frac}${off ?? ''}`;
}

/** Offset between a local EXIF time and the GPS (UTC) time, rounded to 15 minutes. */
function offsetFromGps(local: string, gpsDate: unknown, gpsTime: unknown): string | null {
  if (typeof gpsDate !== 'string' || !Array.isArray(gpsTime) || gpsTime.length < 3) return null;
  const d = /^(\d{4})[:-](\d{2})[:-](\d{2})/.exec(gpsDate);
  if (!d) return null;
  const [h, mi, s] = gpsTime.map(Number) as [number, number, number];
  const utc = Date.UTC(Number(d[1]), Number(d[2]) - 1, Number(d[3]), h, mi, Math.floor(s));
  const l = /^(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})/.exec(local)!;
  const loc = Date.UTC(Number(l[1]), Number(l[2]) - 1, Number(l[3]), Number(l[4]), Number(l[5]), Number(l[6]));
  const minutes = Math.round((loc - utc) / 60000 / 15) * 15;
  if (!Number.isFinite(minutes) || Math.abs(minutes) > 14 * 60) return null;
  const sign = minutes < 0 ? '-' : '+';
  return `${sign}${pad(Math.abs(minutes) / 60)}:${pad(Math.abs(minutes) % 60)}`;
}

export interface ExifFields {
  captured_at: string | null;
  device_model: string | null;
  device_os: string | null;
  latitude: number | null;
  longitude: number | null;
}

const clean = (v: unknown): string | null => (typeof v === 'string' && v.replace(/\0/g, '').trim() ? v.replace(/\0/g, '').trim() : null);

export function deviceModel(make: unknown, model: unknown): string | null {
  const mk = clean(make);
  const md = clean(model);
  if (!md) return mk;
  if (!mk || md.toLowerCase().startsWith(mk.toLowerCase())) return md;
  return `${mk} ${md}`;
}

const validLatLon = (lat: unknown, lon: unknown): lat is number =>
  typeof lat === 'number' && typeof lon === 'number' && Number.isFinite(lat) && Number.isFinite(lon) &&
  Math.abs(lat) <= 90 && Math.abs(lon) <= 180 && !(lat === 0 && lon === 0);

/** EXIF fields of an image (JPEG, PNG eXIf, WebP, HEIC…). Never throws: unreadable EXIF → all null. */
export async function readExif(input: Buffer | string): Promise<ExifFields> {
  const none: ExifFields = { captured_at: null, device_model: null, device_os: null, latitude: null, longitude: null };
  let tags: Record<string, unknown> | undefined;
  try {
    const mod = (await import('exifr')) as unknown as { default?: typeof import('exifr').default } & typeof import('exifr').default;
    const exifr = mod.default ?? mod;
    tags = (await exifr.parse(input, { reviveValues: false, tiff: true, exif: true, gps: true, ifd1: false, xmp: false, icc: false, iptc: false })) as
      | Record<string, unknown>
      | undefined;
  } catch {
    return none;
  }
  if (!tags) return none;
  let captured =
    exifDateToIso(tags.DateTimeOriginal, tags.OffsetTimeOriginal ?? tags.OffsetTime, tags.SubSecTimeOriginal) ??
    exifDateToIso(tags.CreateDate, tags.OffsetTimeDigitized ?? tags.OffsetTime, tags.SubSecTimeDigitized);
  if (captured && !/(Z|[+-]\d{2}:\d{2})$/.test(captured)) {
    const off = offsetFromGps(captured, tags.GPSDateStamp, tags.GPSTimeStamp);
    if (off) captured += off;
  }
  const lat = tags.latitude;
  const lon = tags.longitude;
  return {
    captured_at: captured,
    device_model: deviceModel(tags.Make, tags.Model),
    device_os: clean(tags.Software),
    latitude: validLatLon(lat, lon) ? Math.round(lat * 1e6) / 1e6 : null,
    longitude: validLatLon(lat, lon) ? Math.round((lon as number) * 1e6) / 1e6 : null,
  };
}

// ---------- audio (music-metadata) ----------

type MusicMetadata = typeof import('music-metadata');
let mmPromise: Promise<MusicMetadata> | undefined;

/**
 * music-metadata 11 is ESM-only. `import()` works in Node, tsx and esbuild bundles; Jest's CommonJS
 * sandbox cannot resolve it (its exports have no `require` condition), so we fall back to Node's
 * own loader, which loads ESM synchronously since Node 20.19 (require(esm)). Loaded on first use only.
 */
function loadMusicMetadata(): Promise<MusicMetadata> {
  mmPromise ??= (async () => {
    try {
      return await import('music-metadata');
    } catch (err) {
      const dir = findPackageDir('music-metadata');
      if (!dir) throw err;
      // eslint-disable-next-line @typescript-eslint/no-require-imports
      const Module = require('node:module') as { _load: (request: string, parent: unknown, isMain: boolean) => MusicMetadata };
      return Module._load(path.join(dir, 'lib', 'index.js'), null, false);
    }
  })();
  return mmPromise;
}

export interface AudioInfo {
  duration_seconds: number | null;
  channels: number | null;
  sample_rate: number | null;
  codec: string | null;
  bit_rate: number | null;
}

export async function readAudioInfo(input: Buffer | string, contentType: string): Promise<AudioInfo> {
  const out: AudioInfo = { duration_seconds: null, channels: null, sample_rate: null, codec: null, bit_rate: null };
  try {
    const mm = await loadMusicMetadata();
    const meta =
      typeof input === 'string'
        ? await mm.parseFile(input, { duration: true, skipCovers: true })
        : await mm.parseBuffer(input, { mimeType: contentType, size: input.length }, { duration: true, skipCovers: true });
    const f = meta.format;
    out.duration_seconds = f.duration !== undefined && Number.isFinite(f.duration) ? round3(f.duration) : null;
    out.channels = f.numberOfChannels ?? null;
    out.sample_rate = f.sampleRate ?? null;
    out.codec = f.codec ?? null;
    out.bit_rate = f.bitrate ? Math.round(f.bitrate) : null;
  } catch {
    /* ffprobe below */
  }
  return out;
}

const round3 = (n: number) => Math.round(n * 1000) / 1000;

// ---------- video / ffprobe ----------

/** '+48.8584+002.2945+035.000/' → {lat, lon}. */
export function parseIso6709(s: string | undefined): { latitude: number; longitude: number } | null {
  if (!s) return null;
  const m = /^([+-]\d+(?:\.\d+)?)([+-]\d+(?:\.\d+)?)/.exec(s.trim());
  if (!m) return null;
  const lat = Number(m[1]);
  const lon = Number(m[2]);
  return validLatLon(lat, lon) ? { latitude: lat, longitude: lon } : null;
}

/** QuickTime '2024-05-17T10:11:12+0200' / ISO 'Z' → ISO 8601 with ±HH:MM. */
export function normalizeIsoWithOffset(s: string | undefined): string | null {
  if (!s) return null;
  const m = /^(\d{4}-\d{2}-\d{2})[T ](\d{2}:\d{2}:\d{2})(\.\d+)?\s*(Z|[+-]\d{2}:?\d{2})?$/.exec(s.trim());
  if (!m) return null;
  const frac = m[3] ? m[3].slice(0, 4).padEnd(4, '0') : '';
  const off = m[4] ? normalizeOffset(m[4]) : null;
  return `${m[1]}T${m[2]}${frac}${off ?? ''}`;
}

export interface ProbeFields {
  width: number | null;
  height: number | null;
  duration_seconds: number | null;
  fps: number | null;
  codec: string | null;
  audio_codec: string | null;
  channels: number | null;
  sample_rate: number | null;
  bit_rate: number | null;
  has_video: boolean;
  has_audio: boolean;
  rotation: number | null;
  captured_at: string | null;
  device_model: string | null;
  device_os: string | null;
  latitude: number | null;
  longitude: number | null;
  format_name: string | null;
}

/** The fields the pipeline needs from an ffprobe result. Cover art (attached_pic) is not video. */
export function probeFields(p: ProbeResult): ProbeFields {
  const video = p.streams.find((s) => s.codec_type === 'video' && !s.disposition?.attached_pic);
  const audio = p.streams.find((s) => s.codec_type === 'audio');
  const tags = { ...(p.format.tags ?? {}) };
  const tag = (k: string) => tags[k] ?? tags[k.toLowerCase()];
  const loc = parseIso6709(tag('com.apple.quicktime.location.ISO6709') ?? tag('location'));
  const rotation = video?.side_data_list?.find((d) => typeof d.rotation === 'number')?.rotation as number | undefined;
  const duration = num(p.format.duration) ?? num(video?.duration) ?? num(audio?.duration);
  return {
    width: video?.width ?? null,
    height: video?.height ?? null,
    duration_seconds: duration === null ? null : round3(duration),
    fps: video ? parseRate(video.avg_frame_rate) ?? parseRate(video.r_frame_rate) : null,
    codec: video?.codec_name ?? audio?.codec_name ?? null,
    audio_codec: audio?.codec_name ?? null,
    channels: audio?.channels ?? null,
    sample_rate: num(audio?.sample_rate),
    bit_rate: num(p.format.bit_rate),
    has_video: !!video,
    has_audio: !!audio,
    rotation: rotation ?? (video?.tags?.rotate ? Number(video.tags.rotate) : null),
    captured_at: normalizeIsoWithOffset(tag('com.apple.quicktime.creationdate')) ?? normalizeIsoWithOffset(tag('creation_time')),
    device_model: deviceModel(tag('com.apple.quicktime.make'), tag('com.apple.quicktime.model')),
    device_os: clean(tag('com.apple.quicktime.software')),
    latitude: loc?.latitude ?? null,
    longitude: loc?.longitude ?? null,
    format_name: p.format.format_name ?? null,
  };
}

// ---------- measure ----------

/**
 * Measure a stored file. `input` is the bytes or a local path; `contentType` the declared (or
 * stored) type. Throws only when the bytes cannot be decoded as that category at all (e.g. sharp
 * cannot read an "image"), which the caller treats as content_mismatch.
 */
export async function measure(input: Buffer | string, contentType: string, opts: MeasureOptions = {}): Promise<MediaMetadata> {
  const ct = normalizeContentType(contentType) ?? contentType.toLowerCase();
  const category = categoryOf(ct);
  const size = typeof input === 'string' ? (await stat(input)).size : input.length;
  const md: MediaMetadata = {
    content_type: ct,
    category,
    size_bytes: size,
    content_hash: await contentHash(input),
    width: null,
    height: null,
    duration_seconds: null,
    channels: null,
    sample_rate: null,
    codec: null,
    fps: null,
    has_video: null,
    has_audio: null,
    detected_content_type: null,
    captured_at: null,
    device_model: null,
    device_os: null,
    app_version: null,
    latitude: null,
    longitude: null,
  };

  if (category === 'image') {
    const sharp = (await import('sharp')).default;
    const meta = await sharp(input, { failOn: 'none' }).metadata();
    md.width = meta.width ?? null;
    md.height = meta.pageHeight ?? meta.height ?? null;
    md.orientation = meta.orientation ?? null;
    md.codec = meta.format ?? null;
    md.has_video = false;
    md.has_audio = false;
    md.detected_content_type = meta.format ? imageFormatToType(meta.format) : null;
    Object.assign(md, await readExif(input));
  } else if (category === 'audio') {
    const a = await readAudioInfo(input, ct);
    md.duration_seconds = a.duration_seconds;
    md.channels = a.channels;
    md.sample_rate = a.sample_rate;
    md.codec = a.codec;
    const needProbe = ct === 'audio/mp4' || a.duration_seconds === null || a.channels === null || a.sample_rate === null;
    if (needProbe && ffprobePath()) {
      const p = probeFields(await ffprobe(input));
      md.duration_seconds ??= p.duration_seconds;
      md.channels ??= p.channels;
      md.sample_rate ??= p.sample_rate;
      md.codec ??= p.audio_codec;
      md.has_video = p.has_video;
      md.has_audio = p.has_audio;
      if (ct === 'audio/mp4') md.detected_content_type = p.has_video ? 'video/mp4' : p.has_audio ? 'audio/mp4' : null;
      md.captured_at ??= p.captured_at;
      md.device_model ??= p.device_model;
      md.latitude ??= p.latitude;
      md.longitude ??= p.longitude;
    } else if (ct !== 'audio/mp4') {
      md.has_audio = a.duration_seconds !== null;
      md.has_video = false;
      md.detected_content_type = ct;
    }
  } else if (category === 'video') {
    const p = probeFields(await ffprobe(input));
    md.width = p.width;
    md.height = p.height;
    md.duration_seconds = p.duration_seconds;
    md.fps = p.fps;
    md.codec = p.codec;
    md.channels = p.channels;
    md.sample_rate = p.sample_rate;
    md.has_video = p.has_video;
    md.has_audio = p.has_audio;
    md.captured_at = p.captured_at;
    md.device_model = p.device_model;
    md.device_os = p.device_os;
    md.latitude = p.latitude;
    md.longitude = p.longitude;
    const isQt = (p.format_name ?? '').includes('mov') && ct === 'video/quicktime';
    md.detected_content_type = p.has_video ? (isQt ? 'video/quicktime' : ct) : p.has_audio ? 'audio/mp4' : null;
  }

  md.captured_at ??= opts.captured_at ?? null;
  md.device_model ??= opts.device_model ?? null;
  md.device_os ??= opts.device_os ?? null;
  md.app_version = opts.app_version ?? null;
  if (md.latitude === null && validLatLon(opts.latitude, opts.longitude)) {
    md.latitude = opts.latitude;
    md.longitude = opts.longitude as number;
    md.location_declared = true;
  }
  return md;
}

function imageFormatToType(format: string): string | null {
  switch (format) {
    case 'jpeg':
      return 'image/jpeg';
    case 'png':
      return 'image/png';
    case 'webp':
      return 'image/webp';
    case 'gif':
      return 'image/gif';
    default:
      return null;
  }
}
