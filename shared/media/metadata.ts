/**
 * measure(): the File fields that come from the bytes (spec "File"; D30, D55).
 *
 * - size_bytes, content_hash (`sha256:<hex>`, D30; D26 duplicate detection is the caller's, by this hash)
 * - width/height: sharp for images (the stored bytes' dimensions, not rotated by EXIF Orientation,
 *   D55; animated GIF/WebP: one frame), ffprobe for video.
 * - duration_seconds: music-metadata for audio (./audio-info; ffprobe fills what it misses), ffprobe for video.
 * - channels / sample_rate / codec / fps where the format has them.
 * - captured_at, device_model, device_os, latitude/longitude: EXIF for images (./exif), the
 *   container's QuickTime tags for video (./probe-fields). null when absent. captured_at is the
 *   instant in UTC with milliseconds (D2); a camera time that names no offset (and no GPS time to
 *   derive one from) names no instant, and counts as absent.
 * - app_version: only when supplied by the worker's app (D24).
 * Values the worker's app sent with the upload (D24 multipart fields) fill what the bytes lack.
 */
import { createHash } from 'node:crypto';
import { createReadStream } from 'node:fs';
import { stat } from 'node:fs/promises';
import { categoryOf, normalizeContentType, type MediaCategory } from './sniff';
import { ffprobe, ffprobePath } from './ffmpeg';
import { readExif, validLatLon } from './exif';
import { readAudioInfo } from './audio-info';
import { probeFields } from './probe-fields';

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

  md.captured_at = utcInstant(md.captured_at) ?? utcInstant(opts.captured_at);
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

/** D2: an ISO 8601 time with an offset (or Z) as UTC with milliseconds; null when it names no instant. */
function utcInstant(s: string | null | undefined): string | null {
  if (!s || !/(Z|[+-]\d{2}:?\d{2})$/.test(s)) return null;
  const t = Date.parse(s);
  return Number.isNaN(t) ? null : new Date(t).toISOString();
}
