/**
 * A Transcribe job's result as the file's part records it (D65), read from the output document
 * Transcribe writes to the bucket. Used by the transcription stage when the job's state-change
 * event arrives, and by the scoring stage when that event is late: EventBridge delivers
 * Transcribe's events on a best-effort basis, so a scoring message for a file whose transcript is
 * pending keeps coming back (with the stage's backoff) and, once the job is old enough, reads the
 * output itself (`lateTranscription`), so no file waits for ever on an event that was lost.
 */
import { UpdateCommand } from '@aws-sdk/lib-dynamodb';
import { ConditionalCheckFailedException } from '@aws-sdk/client-dynamodb';
import { db, tableName } from '../db/client';
import { keys } from '../db/keys';
import { now } from '../clock';
import { logger } from '../logger';
import { categoryOf } from '../media/sniff';
import { getObjectBytes, headObject } from '../storage/s3';
import { boundTranscript, classifyTranscribeFailure, deriveFromTranscript, parseTranscribeOutput, transcriptKeyFor, TRANSCRIPT_MAX_BYTES, type SpeechDerived, type TranscriptionState } from '../speech';
import type { PlannedUpload, SubmissionItem } from './model';
import { RetryLater } from './stage-message';

const NO_DERIVATION: SpeechDerived = {
  topics: null,
  keywords: null,
  emotion_tone: null,
  model: null,
  unavailable: {},
};

/** How old a pending transcription is before a scoring message looks for its output itself. */
export const LATE_TRANSCRIPT_CHECK_MS = 10 * 60 * 1000;
/**
 * How long a transcription may stay pending with no output before the job counts as lost: a
 * provider failure (D66), so a new job is started. Below the time the scoring queue's eight
 * receives span with the default backoff (about 45 minutes).
 */
export const LATE_TRANSCRIPT_GIVE_UP_MS = 40 * 60 * 1000;
/** Jobs started for one file before a provider failure sends its scoring message to the dead-letter queue (D66). */
export const TRANSCRIBE_MAX_JOBS = 3;
/**
 * A file whose jobs all failed starts a new one when its last failure is at least this old: the
 * documented redrive of the dead-letter queue (docs/operations.md) then scores it.
 */
export const TRANSCRIBE_REDRIVE_AFTER_MS = 60 * 60 * 1000;

/**
 * The state a FAILED job (or one lost: no result in time) leaves. No speech to identify a language
 * in is a result, not a failure: the recording was heard and has no transcript.
 */
export function failedTranscription(jobName: string, attempt: number, failureReason: string | null): TranscriptionState {
  const kind = classifyTranscribeFailure(failureReason);
  const said = failureReason ?? 'no reason given in its event';
  if (kind === 'no_speech') return { status: 'unavailable', reason: `Amazon Transcribe found no speech to transcribe: ${said}` };
  return {
    status: 'failed',
    provider: 'transcribe',
    job_name: jobName,
    attempt,
    cause: kind,
    reason: `Amazon Transcribe could not transcribe the file: ${said}`,
    failed_at: now().toISOString(),
  };
}

/** Replaces the file's failed transcription (this job's) by the next job's pending state; false when it changed meanwhile. */
export function replaceFailedTranscription(subId: string, round: string, fileId: string, failedJob: string, next: TranscriptionState): Promise<boolean> {
  return replaceTranscription(subId, round, fileId, { status: 'failed', job: failedJob }, next);
}

/**
 * The completed transcription of `jobName` from its output document (and, for audio, what the text
 * model derives from the whole transcript). The transcript it records is bounded (shared/speech/
 * bound.ts): the part holds it beside up to four other files' in one item of at most 400 KB, so a
 * long recording keeps its first segments, marked `truncated` with the whole transcript's counts.
 */
export async function completedFromOutput(upload: PlannedUpload, jobName: string): Promise<TranscriptionState> {
  const doc = JSON.parse((await getObjectBytes(transcriptKeyFor(jobName))).toString('utf8')) as unknown;
  const whole = parseTranscribeOutput(doc);
  const derived = categoryOf(upload.content_type) === 'audio' ? await deriveFromTranscript(whole) : NO_DERIVATION;
  const models = ['amazon-transcribe (language identification, speaker diarization)'];
  if (derived.model) models.push(`${derived.model} (topics, keywords, emotion_tone)`);
  const transcript = boundTranscript(whole.transcript);
  if (transcript.truncated) {
    logger.info('transcript longer than its inline bound: its first segments are kept', {
      job_name: jobName,
      max_bytes: TRANSCRIPT_MAX_BYTES,
      kept_segments: transcript.segments.length,
      total_segments: transcript.total_segments,
      total_end_seconds: transcript.total_end_seconds,
    });
  }
  return { status: 'completed', provider: 'transcribe', job_name: jobName, speech: { ...whole, transcript }, derived, models };
}

/** Writes the result only while this job is the file's pending transcription of the current round. */
export function recordTranscription(subId: string, round: string, fileId: string, jobName: string, state: TranscriptionState): Promise<boolean> {
  return replaceTranscription(subId, round, fileId, { status: 'pending', job: jobName }, state);
}

/** Sets the file's transcription state only while the round is current and the state is still `expected`'s; false otherwise. */
async function replaceTranscription(subId: string, round: string, fileId: string, expected: { status: 'pending' | 'failed'; job: string }, state: TranscriptionState): Promise<boolean> {
  try {
    await db().send(
      new UpdateCommand({
        TableName: tableName(),
        Key: keys.submission(subId),
        UpdateExpression: 'SET #p.#f.#t = :state',
        ConditionExpression: '#r = :r AND #p.#f.#t.#s = :was AND #p.#f.#t.#j = :job',
        ExpressionAttributeNames: { '#p': 'parts', '#f': fileId, '#t': 'transcription', '#r': 'round', '#s': 'status', '#j': 'job_name' },
        ExpressionAttributeValues: { ':state': JSON.parse(JSON.stringify(state)), ':r': round, ':was': expected.status, ':job': expected.job },
      }),
    );
    return true;
  } catch (e) {
    if (e instanceof ConditionalCheckFailedException || (e as Error).name === 'ConditionalCheckFailedException') return false;
    throw e;
  }
}

/**
 * A pending transcription whose event has not come: null while the job is young; once it is
 * older than LATE_TRANSCRIPT_CHECK_MS its output document if Transcribe wrote one, and past
 * LATE_TRANSCRIPT_GIVE_UP_MS with none, a provider failure (the job is lost). The result is recorded as
 * the event's would be.
 */
export async function lateTranscription(sub: SubmissionItem, upload: PlannedUpload, pending: Extract<TranscriptionState, { status: 'pending' }>): Promise<TranscriptionState | null> {
  const age = now().getTime() - Date.parse(pending.started_at);
  if (!(age >= LATE_TRANSCRIPT_CHECK_MS)) return null;
  let state: TranscriptionState | null = null;
  if (await headObject(transcriptKeyFor(pending.job_name))) state = await completedFromOutput(upload, pending.job_name);
  else if (age >= LATE_TRANSCRIPT_GIVE_UP_MS) {
    state = failedTranscription(pending.job_name, pending.attempt ?? 1, `no result within ${LATE_TRANSCRIPT_GIVE_UP_MS / 60_000} minutes of the job's start`);
  }
  if (!state) return null;
  // Another writer recorded this job's outcome first (its state-change event came meanwhile): the
  // caller reads the file again rather than act on this run's guess.
  if (!(await recordTranscription(sub.id, sub.round!, upload.file_id, pending.job_name, state))) throw new RetryLater(`transcription job ${pending.job_name} was recorded meanwhile`);
  logger.warn('transcription taken without its state-change event', { submission_id: sub.id, job_name: pending.job_name, status: state.status, age_ms: age });
  return state;
}
