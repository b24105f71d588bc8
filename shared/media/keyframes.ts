/**
 * Video keyframes for the pipeline (spec "Keyframe": 3 PNGs at 25 %, 50 %, 75 % of the duration,
 * pre-signed for 7 days at read time, D30): one call probes and annotates the video, extracts the
 * keyframes once, stores each PNG through the caller's uploader and returns the Keyframe objects
 * minus URLs plus each keyframe's image annotations.
 *
 *   const { annotations, keyframes } = await annotateVideoWithKeyframes(bytes, async (index, png) => {
 *     const key = objectKeys.keyframe(upload.file_id, index);
 *     await putObject(key, png, 'image/png');
 *     return { key };
 *   });
 *   // annotations: VideoAnnotations (annotations.keyframes[i].annotations = the image annotations)
 *   // keyframes: [{ index, timestamp_seconds, width, height, key, annotations }]
 *
 * Uploads run concurrently with the keyframe annotation. A video without a duration or a video
 * stream gets `keyframes: []` (nothing to place) and its reason in `annotations.unavailable`.
 */
import { annotateVideo, extractKeyframes, type AnnotateVideoOptions, type VideoAnnotations } from './annotate-image';
import { ffprobe } from './ffmpeg';
import { probeFields } from './probe-fields';
import type { ImageAnnotations } from './annotation/types';

export type KeyframeUploader = (index: number, png: Buffer) => Promise<{ key: string }>;

export interface StoredKeyframe {
  index: number;
  timestamp_seconds: number;
  width: number | null;
  height: number | null;
  key: string;
  annotations: ImageAnnotations | null;
}

export async function annotateVideoWithKeyframes(
  input: Buffer | string,
  upload: KeyframeUploader,
  opts: Omit<AnnotateVideoOptions, 'keyframes'> = {},
): Promise<{ annotations: VideoAnnotations; keyframes: StoredKeyframe[] }> {
  const p = probeFields(await ffprobe(input));
  const frames = p.duration_seconds && p.has_video ? await extractKeyframes(input, p.duration_seconds) : []; // extracted once, passed on
  const [annotations, keys] = await Promise.all([
    annotateVideo(input, { ...opts, keyframes: frames.length ? frames : undefined }),
    Promise.all(frames.map((f) => upload(f.index, f.png))),
  ]);
  const byIndex = new Map((annotations.keyframes ?? []).map((k) => [k.index, k.annotations]));
  return {
    annotations,
    keyframes: frames.map((f, i) => ({
      index: f.index,
      timestamp_seconds: f.timestamp_seconds,
      width: f.width,
      height: f.height,
      key: keys[i]!.key,
      annotations: byIndex.get(f.index) ?? null,
    })),
  };
}
