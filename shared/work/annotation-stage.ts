/**
 * The annotation stage of the pipeline (D54), fed the same S3 "Object Created" event as scoring
 * (scoring-stage.ts) from its own queue: `annotateImage` / `annotateAudio` / `annotateVideo`
 * (+ keyframes stored under `keyframes/`, which does not re-enter the pipeline). Writes
 * `parts[file].annotations`, conditioned on the upload round (stage-write.ts), then tries the
 * fan-in (verdict.ts).
 */
import { logger } from '../logger';
import { categoryOf } from '../media/sniff';
import { annotateAudio, annotateImage, annotateVideo, extractKeyframes } from '../media/annotate-image';
import { isMachineryFailure } from '../media/failures';
import { getObjectBytes, objectKeys, putObject } from '../storage/s3';
import { perceptualHash } from '../trust/phash';
import { tryVerdictOn } from './verdict';
import { giveUpAt, objectBudget } from './object-budget';
import type { FilePart } from './model';
import type { Located } from './locate';
import { locate, writePart } from './stage-write';
import type { StageOutcome } from './stage-message';

/** Annotation stage for one object (D55 encodings; spec Keyframe for video). */
export async function annotateObject(key: string): Promise<StageOutcome> {
  const found = await locate(key);
  if (!found) return 'ignored';
  const { sub, upload, part } = found;
  if (part.annotations !== undefined) {
    await tryVerdictOn(sub);
    return 'skipped';
  }
  return objectBudget().run(upload.size_bytes, () => annotateBytes(found), giveUpAt());
}

async function annotateBytes({ sub, upload }: Located): Promise<StageOutcome> {
  const bytes = await getObjectBytes(upload.key);
  let annotations: Record<string, unknown> | null = null;
  let keyframes: FilePart['keyframes'] = null;
  try {
    const category = categoryOf(upload.content_type);
    if (category === 'image') annotations = { ...(await annotateImage(bytes)) };
    else if (category === 'audio') annotations = { ...(await annotateAudio(bytes, upload.content_type)) };
    else if (category === 'video') {
      const v = await annotateVideo(bytes);
      annotations = { ...v };
      if (v.duration_seconds) {
        const frames = await extractKeyframes(bytes, v.duration_seconds);
        keyframes = await Promise.all(
          frames.map(async (f) => {
            const k = objectKeys.keyframe(upload.file_id, f.index);
            await putObject(k, f.png, 'image/png');
            // D69: every keyframe has one; a decoder that failed to load fails the step (retried).
            const ph = await perceptualHash(f.png).catch((err: unknown) => {
              if (isMachineryFailure(err)) throw err;
              return null;
            });
            return { index: f.index, timestamp_seconds: f.timestamp_seconds, width: f.width, height: f.height, key: k, perceptual_hash: ph };
          }),
        );
      }
    }
  } catch (err) {
    // The analysis did not finish (the model worker died, a tool could not run, a keyframe could not
    // be stored): fail, so the message comes back, instead of storing annotations null for good.
    if (isMachineryFailure(err)) throw err;
    // Undecodable content: the scoring stage rejects it; the fan-in must not wait forever.
    logger.info('annotation failed: the bytes do not decode', { submission_id: sub.id, error: (err as Error).message });
    annotations = null;
  }
  const { stored, item } = await writePart(sub, upload.file_id, { annotations: annotations ? JSON.parse(JSON.stringify(annotations)) : null, keyframes }, 'annotations');
  await tryVerdictOn(item);
  return stored ? 'stored' : 'skipped';
}
