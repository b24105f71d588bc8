/**
 * Video frames and loudness with ffmpeg, for the annotation (annotate-image.ts) and the local
 * scorer alike: in a module of their own, so that the scoring consumer, which needs a middle frame
 * and a volume, does not bundle the annotation's models and schemas.
 */
import { extractFrameFromFile, ffmpegStderr, withFile } from './ffmpeg';

export interface Loudness {
  mean_volume_db: number | null;
  max_volume_db: number | null;
}

type SharpFn = (input?: Buffer | string, options?: import('sharp').SharpOptions) => import('sharp').Sharp;
export async function loadSharp(): Promise<SharpFn> {
  const mod = (await import('sharp')) as unknown as { default?: SharpFn } & SharpFn;
  return mod.default ?? mod;
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
  /** Null when the frame's size could not be read (never a made-up 0). */
  width: number | null;
  height: number | null;
  png: Buffer;
}

export const DEFAULT_FRACTIONS: readonly number[] = [0.25, 0.5, 0.75];
export const DEFAULT_MAX_SIDE = 1280;

/**
 * Frames `annotateVideo` extracted from a Buffer, so the pipeline's following
 * `extractKeyframes(sameBuffer, duration)` does not run ffmpeg again (weakly held: freed with the
 * buffer).
 */
export const keyframeCache = new WeakMap<Buffer, { duration: number; frames: ExtractedKeyframe[] }>();

/**
 * Keyframes at `fractions` of the duration (spec default 25 %, 50 %, 75 %) as PNG bytes, each
 * scaled to fit `maxSide` (default 1280, never enlarged). Needs ffmpeg.
 */
export async function extractKeyframes(
  input: Buffer | string,
  durationSeconds: number,
  fractions: readonly number[] = DEFAULT_FRACTIONS,
  maxSide = DEFAULT_MAX_SIDE,
): Promise<ExtractedKeyframe[]> {
  if (Buffer.isBuffer(input) && fractions === DEFAULT_FRACTIONS && maxSide === DEFAULT_MAX_SIDE) {
    const cached = keyframeCache.get(input);
    if (cached && cached.duration === durationSeconds) {
      keyframeCache.delete(input); // one reuse: the pipeline's call right after annotateVideo
      return cached.frames;
    }
  }
  return extractKeyframesUncached(input, durationSeconds, fractions, maxSide);
}

export async function extractKeyframesUncached(input: Buffer | string, durationSeconds: number, fractions: readonly number[], maxSide: number): Promise<ExtractedKeyframe[]> {
  const sharp = await loadSharp();
  return withFile(input, async (file) => {
    const out: ExtractedKeyframe[] = [];
    for (const [index, f] of fractions.entries()) {
      const t = Math.max(0, Math.round(durationSeconds * f * 1000) / 1000);
      const png = await extractFrameFromFile(file, t, maxSide);
      const m = await sharp(png).metadata();
      out.push({ index, timestamp_seconds: t, width: m.width ?? null, height: m.height ?? null, png });
    }
    return out;
  });
}
