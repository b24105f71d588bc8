/**
 * The transcription stage (D65): Amazon Transcribe's "Transcribe Job State Change" event
 * (EventBridge rule `transcription-done` → queue `transcription`) for a job the scoring stage
 * started. It reads the output document Transcribe wrote to the bucket, derives topics, keywords
 * and emotion tone with the Bedrock text model (audio), records the result in the file's part,
 * and sends the upload's Object Created event to the scoring queue again, so that the scoring
 * stage scores the file with its transcript and the fan-in takes the verdict (D54).
 *
 * A FAILED job is classified by its reason (transcript-output.ts `failedTranscription`): no speech
 * to transcribe is a result; a recording Transcribe cannot read, or a failure of the service (a new
 * job is then started by the scoring stage, D66), is recorded as `failed`, and scoring resumes to
 * act on it. Failures here (S3, Bedrock) throw: retried with backoff, then the DLQ (D66).
 * Idempotent: the result is written only while the transcription is pending; a redelivered event
 * whose file is not yet scored sends the scoring event again (harmless: scoring skips done work).
 * An event that arrives before the scoring stage recorded the job it started is retried
 * (`RetryLater`), never dropped.
 */
import { config } from '../config';
import { logger } from '../logger';
import { sendMessage } from '../queues';
import { parseJobName, type TranscriptionState } from '../speech';
import { completedFromOutput, failedTranscription, recordTranscription } from './transcript-output';
import { locateFile } from './locate';
import { jsonBody, PoisonMessage, RetryLater, type StageOutcome } from './stage-message';

export interface TranscribeJobEvent {
  jobName: string;
  status: 'COMPLETED' | 'FAILED';
  failureReason: string | null;
}

export function parseTranscribeEvent(body: string): TranscribeJobEvent {
  const ev = jsonBody<{ source: string; 'detail-type': string; detail: { TranscriptionJobName?: string; TranscriptionJobStatus?: string; FailureReason?: string } }>(body);
  const name = ev?.detail?.TranscriptionJobName;
  const status = ev?.detail?.TranscriptionJobStatus;
  if (ev?.source !== 'aws.transcribe' || ev['detail-type'] !== 'Transcribe Job State Change' || typeof name !== 'string' || (status !== 'COMPLETED' && status !== 'FAILED')) {
    throw new PoisonMessage('not a Transcribe job state change (COMPLETED or FAILED)');
  }
  return { jobName: name, status, failureReason: typeof ev.detail?.FailureReason === 'string' ? ev.detail.FailureReason : null };
}

/** The event the scoring stage reads, for an upload key (the shape of S3's Object Created). */
export function objectCreatedEvent(key: string) {
  return {
    version: '0',
    source: 'media.transcription',
    'detail-type': 'Object Created',
    detail: { bucket: { name: config().bucketName }, object: { key } },
  };
}


export async function transcriptionDone(ev: TranscribeJobEvent): Promise<StageOutcome> {
  const ref = parseJobName(ev.jobName);
  if (!ref) return 'ignored';
  const found = await locateFile(ref);
  if (!found) return 'ignored';
  const { sub, upload, part } = found;
  if (!part.transcription && !part.score) {
    // The scoring stage starts the job before it records it: an event that comes in between is
    // retried with the backoff until the record is there, never dropped.
    throw new RetryLater(`transcription job ${ev.jobName} is not recorded by the scoring stage yet`);
  }
  const recorded = part.transcription;
  if (recorded?.status === 'failed' && ref.attempt > recorded.attempt && !part.score) {
    // A job started again after a failure, whose event comes before the new job is recorded.
    throw new RetryLater(`transcription job ${ev.jobName} is not recorded by the scoring stage yet`);
  }
  if (recorded?.status !== 'pending' || recorded.job_name !== ev.jobName) {
    if (recorded && recorded.status !== 'pending' && !part.score) await sendMessage('scoring', objectCreatedEvent(upload.key));
    return 'skipped';
  }
  let state: TranscriptionState;
  if (ev.status === 'COMPLETED') {
    state = await completedFromOutput(upload, ev.jobName);
  } else {
    state = failedTranscription(ev.jobName, ref.attempt, ev.failureReason);
  }
  const written = await recordTranscription(sub.id, sub.round!, upload.file_id, ev.jobName, state);
  await sendMessage('scoring', objectCreatedEvent(upload.key));
  logger.info('transcription recorded, scoring resumes', { submission_id: sub.id, job_name: ev.jobName, status: state.status });
  return written ? 'stored' : 'skipped';
}

