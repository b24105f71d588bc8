/**
 * Annotations that can be measured for real today (D51 full image shape, D55 encodings, D54 fan-out).
 *
 * Image: color_palette, quality_metrics {blur_score, exposure, noise_level}, width, height.
 * The spec's model-based fields — objects, scene, text_extraction, composition, face_count,
 * safety — are NOT produced yet: no model is integrated, and inventing them would mislead buyers.
 * They are present as `null` ("not analysed"), never as empty lists or zeros, so the shape is
 * stable for consumers. A later issue adds OCR (tesseract.js + @tesseract.js-data/eng), faces and
 * objects (@vladmandic/human), and NSFW (nsfwjs) — see shared/notes/offline-media.md.
 *
 * Audio / video: the measured technical fields (duration, channels, sample_rate, codec, fps,
 * dimensions, loudness); transcripts, speakers, language, scenes, actions are null for the same
 * reason. Video keyframes (spec "Keyframe": 25 %, 50 %, 75 % of the duration) are extracted by
 * `extractKeyframes` as PNG bytes for the pipeline to store.
 *
 * Nothing heavy loads at import time: sharp / music-metadata load on first call, ffmpeg runs as a
 * child process.
 */
import { analyzeImage, type Exposure, type ImageQuality, type NoiseLevel } from './image-quality';
import { extractFrameFromFile, ffmpegStderr, ffprobe, ffprobePath, withFile } from './ffmpeg';
import { probeFields, readAudioInfo } from './metadata';

export const ANNOTATION_MODEL = 'local-media-analysis/1.0';

export interface ImageAnnotations {
  type: 'image';
  width: number;
  height: number;
  color_palette: string[];
  quality_metrics: { blur_score: number; exposure: Exposure; noise_level: NoiseLevel };
  /** Not analysed yet (no object model integrated): null, never invented. */
  objects: null;
  scene: null;
  text_extraction: null;
  composition: null;
  face_count: null;
  safety: null;
  annotation_model: string;
}

/** Image annotations from the bytes (or a local path). `quality` may be passed if already computed. */
export async function annotateImage(input: Buffer | string, quality?: ImageQuality): Promise<ImageAnnotations> {
  const q = quality ?? (await analyzeImage(input));
  return {
    type: 'image',
    width: q.width,
    height: q.height,
    color_palette: q.color_palette,
    quality_metrics: { blur_score: q.blur_score, exposure: q.exposure, noise_level: q.noise_level },
    objects: null,
    scene: null,
    text_extraction: null,
    composition: null,
    face_count: null,
    safety: null,
    annotation_model: ANNOTATION_MODEL,
  };
}

export interface Loudness {
  mean_volume_db: number | null;
  max_volume_db: number | null;
}

export interface AudioAnnotations {
  type: 'audio';
  duration_seconds: number | null;
  channels: number | null;
  sample_rate: number | null;
  codec: string | null;
  bit_rate: number | null;
  mean_volume_db: number | null;
  max_volume_db: number | null;
  /** true when the whole file is at or below −60 dBFS mean (nothing audible) */
  silent: boolean | null;
  /** Not analysed yet (no speech/audio models integrated). */
  transcript: null;
  speaker_count: null;
  language: null;
  annotation_model: string;
}

export async function annotateAudio(input: Buffer | string, contentType: string): Promise<AudioAnnotations> {
  const a = await readAudioInfo(input, contentType);
  if ((a.channels === null || a.sample_rate === null || a.duration_seconds === null) && ffprobePath()) {
    const p = probeFields(await ffprobe(input));
    a.duration_seconds ??= p.duration_seconds;
    a.channels ??= p.channels;
    a.sample_rate ??= p.sample_rate;
    a.codec ??= p.audio_codec;
    a.bit_rate ??= p.bit_rate;
  }
  const loud = await loudness(input).catch(() => ({ mean_volume_db: null, max_volume_db: null }));
  return {
    type: 'audio',
    ...a,
    ...loud,
    silent: loud.mean_volume_db === null ? null : loud.mean_volume_db <= -60,
    transcript: null,
    speaker_count: null,
    language: null,
    annotation_model: ANNOTATION_MODEL,
  };
}

export interface VideoAnnotations {
  type: 'video';
  duration_seconds: number | null;
  width: number | null;
  height: number | null;
  fps: number | null;
  codec: string | null;
  rotation: number | null;
  has_audio: boolean;
  audio_codec: string | null;
  channels: number | null;
  sample_rate: number | null;
  bit_rate: number | null;
  /** Not analysed yet (no video/speech models integrated). */
  scenes: null;
  actions: null;
  transcript: null;
  annotation_model: string;
}

export async function annotateVideo(input: Buffer | string): Promise<VideoAnnotations> {
  const p = probeFields(await ffprobe(input));
  return {
    type: 'video',
    duration_seconds: p.duration_seconds,
    width: p.width,
    height: p.height,
    fps: p.fps,
    codec: p.codec,
    rotation: p.rotation,
    has_audio: p.has_audio,
    audio_codec: p.audio_codec,
    channels: p.channels,
    sample_rate: p.sample_rate,
    bit_rate: p.bit_rate,
    scenes: null,
    actions: null,
    transcript: null,
    annotation_model: ANNOTATION_MODEL,
  };
}

/** Mean / max volume (dBFS) with ffmpeg's volumedetect; nulls when ffmpeg is absent. */
export async function loudness(input: Buffer | string): Promise<Loudness> {
  const stderr = await ffmpegStderr(input, (file) => ['-hide_banner', '-nostats', '-i', file, '-map', '0:a:0', '-af', 'volumedetect', '-f', 'null', '-']);
  if (stderr === null) return { mean_volume_db: null, max_volume_db: null };
  const mean = /mean_volume:\s*(-?[\d.]+|-inf) dB/.exec(stderr)?.[1];
  const max = /max_volume:\s*(-?[\d.]+|-inf) dB/.exec(stderr)?.[1];
  const val = (s: string | undefined) => (s === undefined ? null : s === '-inf' ? -120 : Number(s));
  return { mean_volume_db: val(mean), max_volume_db: val(max) };
}

export interface ExtractedKeyframe {
  index: number;
  timestamp_seconds: number;
  width: number;
  height: number;
  png: Buffer;
}

/**
 * Keyframes at `fractions` of the duration (spec default 25 %, 50 %, 75 %) as PNG bytes, each
 * scaled to fit `maxSide` (default 1280, never enlarged). Needs ffmpeg.
 */
export async function extractKeyframes(
  input: Buffer | string,
  durationSeconds: number,
  fractions: readonly number[] = [0.25, 0.5, 0.75],
  maxSide = 1280,
): Promise<ExtractedKeyframe[]> {
  const sharpMod = (await import('sharp')) as unknown as { default?: typeof import('sharp') } & typeof import('sharp');
  const sharp = sharpMod.default ?? sharpMod;
  return withFile(input, async (file) => {
    const out: ExtractedKeyframe[] = [];
    for (const [index, f] of fractions.entries()) {
      const t = Math.max(0, Math.round(durationSeconds * f * 1000) / 1000);
      const png = await extractFrameFromFile(file, t, maxSide);
      const m = await sharp(png).metadata();
      out.push({ index, timestamp_seconds: t, width: m.width ?? 0, height: m.height ?? 0, png });
    }
    return out;
  });
}
