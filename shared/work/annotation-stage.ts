/**
 * The annotation stage of the pipeline (D54), fed the same S3 "Object Created" event as scoring
 * (scoring-stage.ts) from its own queue: `annotateImage` / `annotateAudio` / `annotateVideo`
 * (+ keyframes stored under `keyframes/`, which does not re-enter the pipeline). Writes
 * `parts[file].annotations`, conditioned on the upload round (stage-write.ts), then tries the
 * fan-in (verdict.ts).
 *
 * Bytes that do not decode for annotation (a video whose frames ffmpeg cannot decode) are recorded
 * as `annotations: null` with `annotation_error` (code `unreadable_media`), which the verdict
 * rejects (D54: a File never has annotations null). A machinery failure (a tool missing or killed,
 * a module that does not load, ENOMEM, an S3 write) is not recorded: the step fails and its
 * message comes back, then waits in the dead-letter queue (D66, shared/media/failures.ts).
 */
import { logger } from '../logger';
import { categoryOf } from '../media/sniff';
import { annotateAudio, annotateImage, annotateVideo, extractKeyframes } from '../media/annotate-image';
import { isMachineryFailure } from '../media/failures';
import { getObjectBytes, objectKeys, putObject, tagVerdict } from '../storage/s3';
import { perceptualHash } from '../trust/phash';
import { tryVerdictOn } from './verdict';
import type { AnnotationError } from './verdict-input';
import { giveUpAt, objectBudget } from './object-budget';
import type { FilePart } from './model';
import type { Located } from './locate';
import { locate, writePart } from './stage-write';
import type { StageOutcome } from './stage-message';

/** Annotation stage for one object (D55 encodings; spec Keyframe for video). */
export async function annotateObject(key: string): Promise<StageOutcome> {
  // A submission a pre-check rejected before this stage finished is annotated all the same: the
  // buyer may approve it by override, and its File must carry its annotations (D54, D71).
  const found = await locate(key, { rejected: true });
  if (!found) return 'ignored';
  const { sub, upload, part } = found;
  if (part.annotations !== undefined) {
    await tryVerdictOn(sub);
    return 'skipped';
  }
  // Refused by its byte check in the scoring stage, which deleted the object: nothing to annotate
  // in this round (a new plan gives the file a new round). Without this, the read of the deleted
  // object would fail on every delivery until the message reached the dead-letter queue.
  if (upload.mode === 'presigned' && part.upload_error) return 'refused';
  return objectBudget().run(upload.size_bytes, () => annotateBytes(found), giveUpAt());
}

interface Analysis {
  annotations: Record<string, unknown> | null;
  keyframes: FilePart['keyframes'];
}

async function annotateBytes({ sub, upload }: Located): Promise<StageOutcome> {
  const bytes = await getObjectBytes(upload.key);
  let attrs: Analysis & { annotation_error?: AnnotationError };
  try {
    const { annotations, keyframes } = await analyse(upload, bytes);
    attrs = { annotations: annotations ? JSON.parse(JSON.stringify(annotations)) : null, keyframes };
  } catch (err) {
    // The analysis did not finish (the model worker died, a tool could not run, a keyframe could not
    // be stored): fail, so the message comes back, instead of recording anything for good.
    if (isMachineryFailure(err)) throw err;
    // Undecodable content: recorded as such, so the verdict rejects the file (never approves it
    // with annotations null) and the fan-in does not wait forever.
    logger.info('annotation failed: the bytes do not decode', { submission_id: sub.id, error: (err as Error).message });
    attrs = { annotations: null, keyframes: null, annotation_error: undecodable(upload, err) };
  }
  const { stored, item } = await writePart(sub, upload.file_id, { ...attrs }, 'annotations');
  await tryVerdictOn(item);
  await tagUndeliveredKeyframes(sub, upload.file_id, attrs.keyframes, stored, item);
  return stored ? 'stored' : 'skipped';
}

/**
 * Keyframes this run stored that no File will deliver are tagged `verdict=rejected`, so the
 * bucket's lifecycle rule deletes them with the rejected bytes: those of a submission already
 * rejected when they were recorded (a pre-check rejects at once, before the annotation is done;
 * a rejection decided after it tags them itself, verdict.ts), those of a round replaced meanwhile
 * (the write was refused), and those a duplicate delivery stored again over a rejected
 * submission's (a PUT replaces the object's tags).
 */
async function tagUndeliveredKeyframes(sub: Located['sub'], fileId: string, keyframes: FilePart['keyframes'], stored: boolean, item: Located['sub'] | undefined): Promise<void> {
  if (!keyframes?.length) return;
  const staleRound = !stored && item?.round !== sub.round;
  if (!staleRound && item?.status !== 'rejected') return;
  await tagVerdict(keyframes.map((k) => k.key), 'rejected').catch((err: Error) => logger.warn('tagging undelivered keyframes failed; they are kept', { error: err, submission_id: sub.id, file_id: fileId }));
}

function undecodable(upload: Located['upload'], err: unknown): AnnotationError {
  const what = categoryOf(upload.content_type) ?? 'file';
  return { code: 'unreadable_media', message: `the ${what} could not be decoded for annotation`, detail: (err instanceof Error ? err.message : String(err)).slice(0, 300) };
}

/** The file's annotations (and a video's stored keyframes); throws when the bytes do not decode. */
async function analyse(upload: Located['upload'], bytes: Buffer): Promise<Analysis> {
  const category = categoryOf(upload.content_type);
  if (category === 'image') return { annotations: { ...(await annotateImage(bytes)) }, keyframes: null };
  if (category === 'audio') return { annotations: { ...(await annotateAudio(bytes, upload.content_type)) }, keyframes: null };
  if (category === 'video') return analyseVideo(upload, bytes);
  return { annotations: null, keyframes: null };
}

async function analyseVideo(upload: Located['upload'], bytes: Buffer): Promise<Analysis> {
  const v = await annotateVideo(bytes);
  const keyframes = v.duration_seconds ? await storeKeyframes(upload, bytes, v.duration_seconds) : null;
  return { annotations: { ...v }, keyframes };
}

/** The video's keyframes, stored under `keyframes/` (spec Keyframe), each with its perceptual hash. */
async function storeKeyframes(upload: Located['upload'], bytes: Buffer, durationSeconds: number): Promise<NonNullable<FilePart['keyframes']>> {
  const frames = await extractKeyframes(bytes, durationSeconds);
  return Promise.all(
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
