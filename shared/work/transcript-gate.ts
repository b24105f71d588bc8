/**
 * The scoring stage's wait for a file's transcript (D65, D66): audio and video sound tracks are
 * scored with their transcript, so scoring waits until Amazon Transcribe has heard the recording.
 *
 * - The first scoring message starts the file's job and waits (`RetryLater`); the job's
 *   state-change event resumes scoring, and the message's own returns read the output if that
 *   event is lost (transcript-output.ts `lateTranscription`).
 * - A job that fails for the provider's sake (an internal failure, an access error, a job lost
 *   with no result) is never held against the file (D66): a new job is started, up to
 *   TRANSCRIBE_MAX_JOBS, and the file's scoring goes on in a fresh scoring message (`HandedOver`:
 *   the message that waited for the failed job has spent its receives on it); after the last job
 *   the message throws, so it ends in the dead-letter queue with its alarm, and a redrive an hour
 *   or more after the last failure starts a new job. A job counted as lost that finished after
 *   all (its output is there) is taken instead of starting another.
 * - Audio is judged from its transcript, never from its measurements alone (D65): an audio file
 *   waits for a transcript as above; a recording Transcribe cannot read is answered by the caller
 *   (a rejection naming Transcribe's reason). A video's sound track is part of what it is judged
 *   on, so a video waits through the service's failures the same way (D66: a provider failure
 *   decides nothing); only a sound track Transcribe cannot read (the media's own fault) leaves a
 *   video to be scored from its frames, the reason saying why.
 */
import { config } from '../config';
import { now } from '../clock';
import { logger } from '../logger';
import { categoryOf } from '../media/sniff';
import type { MediaMetadata } from '../media/metadata';
import { jobNameFor, transcriberFor, transcriptKeyFor, type TranscriptionState } from '../speech';
import type { FilePart, PlannedUpload, SubmissionItem } from './model';
import { writePart } from './stage-write';
import { RetryLater } from './stage-message';
import { completedFromOutput, lateTranscription, replaceFailedTranscription, TRANSCRIBE_MAX_JOBS, TRANSCRIBE_REDRIVE_AFTER_MS } from './transcript-output';
import { headObject } from '../storage/s3';
import { sendMessage } from '../queues';
import { objectCreatedEvent } from './transcription';

/** The file's scoring goes on in a new scoring message (a new transcription job was started): this one is done. */
export class HandedOver extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'HandedOver';
  }
}

/** Seconds before the fresh scoring message of a restarted job comes: a job takes at least this long. */
const HAND_OVER_DELAY_SECONDS = 60;

type Failed = Extract<TranscriptionState, { status: 'failed' }>;

/** JSON-safe for the item (no undefined). */
const plain = <T>(v: T): T => JSON.parse(JSON.stringify(v)) as T;

/** Starts job `attempt` of the file: its pending state, or `unavailable` where no transcriber runs (local). */
async function start(sub: SubmissionItem, upload: PlannedUpload, attempt: number): Promise<TranscriptionState> {
  const jobName = jobNameFor(sub.id, sub.round!, upload.file_id, attempt);
  const r = await transcriberFor(config().runtime).start({ bucket: config().bucketName, key: upload.key, jobName, outputKey: transcriptKeyFor(jobName), contentType: upload.content_type });
  if (r.status === 'unavailable') return r;
  return { status: 'pending', provider: 'transcribe', job_name: r.job_name, started_at: now().toISOString(), ...(attempt > 1 ? { attempt } : {}) };
}

/** A failure the file must not be scored past: the service failed on an audio file or a video's sound track. */
const mustRetry = (upload: PlannedUpload, t: TranscriptionState): t is Failed =>
  t.status === 'failed' && t.cause === 'provider' && ['audio', 'video'].includes(categoryOf(upload.content_type) ?? '');

/**
 * After a provider failure: the failed job's result if it came after all, else the next job,
 * recorded in place of the failed one, with the file's scoring handed over to a fresh message; or,
 * after the last job, the dead-letter queue.
 */
async function restart(sub: SubmissionItem, upload: PlannedUpload, failed: Failed): Promise<TranscriptionState> {
  if (await headObject(transcriptKeyFor(failed.job_name))) {
    // Counted as lost, but finished: its transcript is taken.
    const done = await completedFromOutput(upload, failed.job_name);
    if (await replaceFailedTranscription(sub.id, sub.round!, upload.file_id, failed.job_name, done)) return done;
    throw new RetryLater('the transcription changed meanwhile');
  }
  const since = now().getTime() - Date.parse(failed.failed_at);
  if (failed.attempt >= TRANSCRIBE_MAX_JOBS && !(since >= TRANSCRIBE_REDRIVE_AFTER_MS)) {
    throw new Error(
      `Amazon Transcribe failed on ${failed.attempt} jobs for this recording (last: ${failed.reason}); the file is not scored without being heard, ` +
        `so this message goes to the dead-letter queue; a redrive an hour or more after the last failure starts a new job`,
    );
  }
  const next = await start(sub, upload, failed.attempt + 1);
  if (!(await replaceFailedTranscription(sub.id, sub.round!, upload.file_id, failed.job_name, next))) {
    throw new RetryLater('the transcription changed meanwhile');
  }
  logger.warn('transcription failed for the provider; a new job is started', { submission_id: sub.id, failed_job: failed.job_name, reason: failed.reason, next_job: next.status === 'pending' ? next.job_name : null });
  if (next.status !== 'pending') return next;
  await sendMessage('scoring', objectCreatedEvent(upload.key), HAND_OVER_DELAY_SECONDS);
  throw new HandedOver(`transcription job ${next.job_name} started after ${failed.job_name} failed; a fresh scoring message waits for it`);
}

/**
 * The file's transcription as scoring may use it (completed, unavailable, or failed: a media
 * failure, or a video's), or throws: `RetryLater` while a job runs, an error after the last job.
 */
export async function transcriptForScoring(sub: SubmissionItem, upload: PlannedUpload, part: FilePart, metadata: MediaMetadata): Promise<TranscriptionState> {
  let t: TranscriptionState;
  if (part.transcription) t = part.transcription;
  else {
    const category = categoryOf(upload.content_type);
    if (category !== 'audio' && category !== 'video') return { status: 'unavailable', reason: 'not audio or video' };
    if (category === 'video' && metadata.has_audio === false) return { status: 'unavailable', reason: 'the video has no sound track' };
    t = await start(sub, upload, 1);
    if (t.status === 'pending') {
      await writePart(sub, upload.file_id, { transcription: plain(t), metadata: plain(metadata) }, 'transcription');
      logger.info('scoring waits for the transcript', { submission_id: sub.id, job_name: t.job_name });
    }
  }
  if (mustRetry(upload, t)) t = await restart(sub, upload, t);
  if (t.status !== 'pending') return t;
  // The job's state-change event resumes scoring. This message also comes back (backoff):
  // EventBridge delivers Transcribe's events on a best-effort basis, and a lost one must not
  // leave the file waiting for ever (transcript-output.ts `lateTranscription`).
  const late = await lateTranscription(sub, upload, t);
  if (!late) throw new RetryLater(`waiting for transcription job ${t.job_name}`);
  // A job lost with no result: the next starts now (this message has spent its receives waiting).
  return mustRetry(upload, late) ? restart(sub, upload, late) : late;
}
