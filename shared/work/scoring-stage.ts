/**
 * The scoring stage of the pipeline (D54), fed the S3 "Object Created" event from its queue:
 * (pre-signed uploads: the D25 checks on the landed bytes) → `measure` (size, type, dimensions,
 * duration, content_hash, EXIF capture time and device, GPS → worker_region) → D26 pre-checks
 * (resolution, duration, bytes already approved for the job) → the provider of
 * `scorerFor(env, runtime)` (D28). Writes `parts[file].metadata/score`.
 *
 * The annotation stage is annotation-stage.ts (its consumer bundles no scorer, this one no
 * annotation models). Each stage writes only its own attributes of the file's part, conditioned
 * on the upload round (stage-write.ts), and skips work already done, so redelivered and duplicated
 * events are harmless. Each then tries the fan-in (verdict.ts) on the item its write returned.
 * Unknown keys, stale rounds and decided submissions are acknowledged and dropped; anything
 * unexpected throws, so the message is retried and, after maxReceiveCount, parked in the
 * dead-letter queue.
 */
import type { SandboxDirective } from '../scoring/types';
import { config } from '../config';
import { logger } from '../logger';
import { getJobItem } from '../jobs';
import type { JobItem } from '../jobs/model';
import { keys } from '../db/keys';
import { measure, type MediaMetadata } from '../media/metadata';
import { categoryOf } from '../media/sniff';
import { checkUpload } from '../media/upload-check';
import { workerRegion } from '../media/region';
import { analyzeImage } from '../media/image-quality';
import { isMachineryFailure } from '../media/failures';
import { precheck, precheckRejection, scorerFor, type ScoreResult, type Scorer, type ScoringJob } from '../scoring';
import { injectScoringFault } from '../scoring/faults';
import type { TranscriptionState } from '../speech';
import { deleteObjects, getObjectBytes } from '../storage/s3';
import { trustReads, trustResult, type TrustAttrs } from '../trust';
import { batchGetConsistent, keyId } from '../db/batch-get';
import { completeIfAllLanded } from './complete-upload';
import { tryVerdictOn } from './verdict';
import { giveUpAt, objectBudget } from './object-budget';
import { retryInFlight, type FilePart, type PlannedUpload, type SubmissionItem } from './model';
import { tagIfNeverDelivered, type Located } from './locate';
import { claimScoring, locate, releaseScoringClaim, writePart } from './stage-write';
import { RetryLater, type StageOutcome } from './stage-message';
import { now } from '../clock';
import { timeLeftMs } from '../invocation-deadline';
import { HandedOver, transcriptForScoring } from './transcript-gate';

export function scoringJob(job: JobItem): ScoringJob {
  return {
    type: job.type as ScoringJob['type'],
    description: job.description as string,
    scoring_criteria: (job.scoring_criteria as string | null) ?? null,
    worker_guidelines: (job.worker_guidelines as string | null) ?? null,
    accepted_formats: job.accepted_formats as string[],
    min_width: (job.min_width as number | null) ?? null,
    min_height: (job.min_height as number | null) ?? null,
    min_duration_seconds: (job.min_duration_seconds as number | null) ?? null,
    max_duration_seconds: (job.max_duration_seconds as number | null) ?? null,
    min_star_rating: (job.min_star_rating as number | null) ?? null,
  };
}

/** JSON-safe metadata for the item (no undefined). */
/** A pre-signed round whose files are still landing: the first upload, or a planned retry (D24, D27). */
const awaitsFiles = (sub: SubmissionItem) => sub.status === 'awaiting_upload' || (sub.status === 'retry_pending' && retryInFlight(sub));

const plain = (m: MediaMetadata) => JSON.parse(JSON.stringify(m)) as Record<string, unknown> & MediaMetadata;

let scorerOverride: ((env: 'live' | 'test') => Scorer) | null = null;
/** Tests and benchmarks: inject a scorer (e.g. Bedrock with a recorded client). */
export function setScorerFactory(f: ((env: 'live' | 'test') => Scorer) | null): void {
  scorerOverride = f;
}

export interface PrecheckContext {
  sub: SubmissionItem;
  upload: PlannedUpload;
  metadata: Record<string, unknown> & MediaMetadata;
  bytes: Buffer;
  region: string | null;
}

/**
 * The pre-check step (D26, D68): every check that rejects before any model runs, in order; the
 * first rejection wins (1 star, its reason codes, no charge). Add further checks here, each in
 * its own module returning a `precheckRejection(...)` or null.
 *
 * Everything it reads is one strongly consistent BatchGetItem: the job, the job's duplicate guard
 * for these bytes (D26), the organization's (D69) and the near-duplicate buckets of the image's
 * perceptual hash (D69). Answers the job too, for the scorer.
 */
export async function prechecks(ctx: PrecheckContext): Promise<{ rejection: ScoreResult | null; attrs: Partial<TrustAttrs>; job: JobItem }> {
  const { sub, upload, metadata, bytes } = ctx;
  const input = { orgId: sub.org_id, env: sub.environment, contentType: upload.content_type, bytes, metadata };
  const reads = await trustReads(input);
  const jobKey = keys.job(sub.job_id);
  const guardKey = keys.jobContentHash(sub.job_id, metadata.content_hash.replace(/^sha256:/, ''));
  const items = await batchGetConsistent([jobKey, guardKey, ...reads.keys]);
  const job = items.get(keyId(jobKey)) as JobItem | undefined;
  if (!job) throw new Error(`job ${sub.job_id} of submission ${sub.id} not found`);
  const dup = items.has(keyId(guardKey)) ? [metadata.content_hash] : null;
  // D69/D70: organization-wide duplicates, near-duplicates, capture point (shared/trust).
  const trust = trustResult({ ...input, jobLocation: job.location }, reads, items);
  const rejection = precheck(scoringJob(job), metadata, dup) ?? (trust.failures.length ? precheckRejection(trust.failures) : null);
  return { rejection, attrs: trust.attrs, job };
}

/**
 * An audio file or video a pre-check rejected is never heard (D65): its speech fields say so, should
 * an override deliver it (D58: null with the reason, runtime or not).
 */
function notHeard(upload: Located['upload'], metadata: MediaMetadata, pre: ScoreResult): TranscriptionState | undefined {
  const category = categoryOf(upload.content_type);
  if (category !== 'audio' && category !== 'video') return undefined;
  if (category === 'video' && metadata.has_audio === false) return undefined; // nothing to hear: the annotations say so
  return { status: 'unavailable', reason: `not transcribed: the file was rejected by a check (${pre.reason_codes.join(', ')}) before its recording was heard` };
}

/** The recording's mean volume (dBFS), or null when it has no decodable audio; a tool that cannot run fails the step. */
async function meanVolumeOf(bytes: Buffer): Promise<number | null> {
  const { loudness } = await import('../media/frames');
  return (await loudness(bytes).catch((err: unknown) => {
    if (isMachineryFailure(err)) throw err;
    return { mean_volume_db: null };
  })).mean_volume_db;
}

/** Scoring stage for one object. */
export async function scoreObject(key: string): Promise<StageOutcome> {
  const found = await locate(key);
  if (!found) {
    await tagIfNeverDelivered(key);
    return 'ignored';
  }
  const { sub, upload, part } = found;
  if (part.score) {
    // A redelivery after the score was stored: a completion that failed after it is done now.
    if (upload.mode === 'presigned' && awaitsFiles(sub)) await completeIfAllLanded(sub.id, sub.round!);
    await tryVerdictOn(sub);
    return 'skipped';
  }
  return objectBudget()
    .run(upload.size_bytes, () => scoreBytes(found), giveUpAt())
    .catch((err: unknown) => {
      // A new transcription job was started and a fresh message waits for it: this one is done.
      if (err instanceof HandedOver) return 'deferred' as const;
      throw err;
    });
}

/** The longest a delivery holds a file's scoring claim (bounded below by its invocation's deadline). */
const SCORING_CLAIM_MAX_MS = 15 * 60_000;

async function scoreBytes({ sub, upload, part }: Located): Promise<StageOutcome> {
  if (upload.mode === 'presigned' && part.upload_error && awaitsFiles(sub)) {
    // Bytes sent again to the URL of a file refused by its byte check: the refusal stands for this
    // round (its other stage may already hold results of the refused bytes), so they are deleted
    // too; a new plan gives the file a new round and URL.
    await deleteObjects([upload.key]);
    return 'refused';
  }
  const bytes = await getObjectBytes(upload.key);

  let refusedAfterCompletion: ScoreResult | null = null;
  if (upload.mode === 'presigned') {
    // D25 on the landed bytes: the signed Content-Length fixed the size; the magic bytes are checked here.
    const job = (await getJobItem(sub.job_id, false))!;
    const r = checkUpload({ declaredType: upload.content_type, bytesHead: bytes.subarray(0, 1 << 20), bytes, size: bytes.length, acceptedFormats: job.accepted_formats as string[] });
    if (!r.ok || bytes.length !== upload.size_bytes) {
      const first = r.ok ? { code: 'size_mismatch', message: `The object is ${bytes.length} bytes, not the declared ${upload.size_bytes}.` } : { code: r.errors[0]!.code!, message: r.errors[0]!.message };
      await deleteObjects([upload.key]); // nothing stays behind (D25)
      if (awaitsFiles(sub)) {
        // The round is still open: the worker sees the error on the file and may send it again.
        // Another file's stage may have completed the round since `sub` was read: then no new
        // upload is awaited, and the file is rejected by its pre-check below (never stuck).
        const { item } = await writePart(sub, upload.file_id, { upload_error: first });
        if (!item || awaitsFiles(item)) return 'refused';
      }
      // The round completed on its other files before this one was checked: no new upload is
      // awaited, so the file is rejected by its pre-check and the fan-in decides (never stuck).
      refusedAfterCompletion = precheckRejection([{ code: 'unreadable_media', reason: first.message }]);
    }
  }
  // The bytes passed their check: the round completes now (when its other objects have landed
  // too), not after the provider answers. A provider outage, its backoff or a transcript wait must
  // not let the reservation run out under a worker who delivered in time.
  let triedCompletion = false;
  if (upload.mode === 'presigned' && !refusedAfterCompletion && awaitsFiles(sub)) {
    await completeIfAllLanded(sub.id, sub.round!);
    triedCompletion = true;
  }

  let score: ScoreResult;
  let metadata: (Record<string, unknown> & MediaMetadata) | null = null;
  let region: string | null = null;
  let transcription: TranscriptionState | undefined;
  let trustAttrs: Partial<TrustAttrs> = {};
  try {
    if (!refusedAfterCompletion) metadata = plain(await measure(bytes, upload.content_type, sub.device ?? {}));
  } catch (err) {
    // D66: a tool, the disk or a module failing is no verdict on the bytes: the message comes back.
    if (isMachineryFailure(err)) throw err;
    logger.info('measure failed: the bytes do not decode', { submission_id: sub.id, error: (err as Error).message });
  }
  if (refusedAfterCompletion) {
    score = refusedAfterCompletion;
  } else if (!metadata) {
    score = precheckRejection([{ code: 'unreadable_media', reason: `the file could not be decoded as ${upload.content_type}` }]);
  } else if (metadata.detected_content_type && metadata.detected_content_type !== metadata.content_type) {
    score = precheckRejection([{ code: 'unreadable_media', reason: `the file content is ${metadata.detected_content_type}, not the declared ${metadata.content_type}` }]);
  } else {
    region = await workerRegion(metadata.latitude, metadata.longitude).catch((err: unknown) => {
      if (isMachineryFailure(err)) throw err; // not "no region": retried
      return null;
    });
    const checked = await prechecks({ sub, upload, metadata, bytes, region });
    const job = checked.job;
    trustAttrs = checked.attrs;
    const pre = checked.rejection;
    // D65: audio and video sound tracks are scored with their transcript; the provider waits for it.
    const heard = pre ? undefined : await transcriptForScoring(sub, upload, part, metadata);
    transcription = heard ?? (pre ? notHeard(upload, metadata, pre) : undefined);
    if (pre || !heard) score = pre!;
    else if (heard.status === 'failed' && categoryOf(upload.content_type) === 'audio') {
      // D65: audio is judged from what it says; a recording Transcribe cannot read cannot be heard
      // (a provider failure never gets here: transcript-gate.ts starts a new job instead).
      score = precheckRejection([{ code: 'unreadable_media', reason: heard.reason }]);
    } else {
      const transcription = heard;
      let claimedUntil: number | null = null;
      if (part.transcription) {
        // A transcript was waited for: the message that waited and the one its arrival sent may
        // both be here. One asks the model; the other comes back later and finds the score.
        const at = now().getTime();
        claimedUntil = at + Math.min(timeLeftMs(), SCORING_CLAIM_MAX_MS);
        const claim = await claimScoring(sub, upload.file_id, at, claimedUntil);
        if (!claim.claimed) {
          if (claim.item?.parts?.[upload.file_id]?.score) {
            await tryVerdictOn(claim.item);
            return 'skipped';
          }
          if (!claim.item || claim.item.round !== sub.round || !claim.item.parts?.[upload.file_id]) return 'skipped'; // decided or replaced meanwhile
          throw new RetryLater('another delivery of this file\'s scoring message is scoring it');
        }
      }
      const scorer = scorerOverride ? scorerOverride(sub.environment) : scorerFor(sub.environment, config().runtime);
      const category = categoryOf(upload.content_type);
      // A failure gives the claim back, so this message's retry need not wait for it to expire.
      const release = async (err: unknown): Promise<never> => {
        if (claimedUntil !== null) await releaseScoringClaim(sub, upload.file_id, claimedUntil).catch(() => undefined);
        throw err;
      };
      const ask = async () => {
        injectScoringFault(); // D64: LOCAL_FAULT_SCORING_FAILURES (local runtime only)
        return scorer.score({
          job: scoringJob(job),
          // Sandbox scenarios (test environment only, docs/sandbox.md).
          sandboxDirective: sub.environment === 'test' ? ((sub.sandbox_directive as SandboxDirective | undefined) ?? null) : null,
          file: {
            content_type: upload.content_type,
            bytes,
            s3: { bucket: config().bucketName, key: upload.key },
            metadata,
            original_filename: upload.filename,
            // The stored transcript is bounded (shared/speech/bound.ts) and the prompt quotes at most
            // its first 8,000 characters (scoring/bedrock.ts). Empty and cut is not "no speech".
            ...(transcription.status === 'completed'
              ? {
                  transcript: transcription.speech.transcript.full_text || null,
                  transcript_truncated: transcription.speech.transcript.truncated === true,
                  transcript_unavailable: transcription.speech.transcript.full_text ? null : transcription.speech.transcript.truncated ? 'the transcript was too long to keep any of it' : 'no speech in the recording',
                }
              : { transcript: null, transcript_unavailable: transcription.status === 'unavailable' || transcription.status === 'failed' ? transcription.reason : null }),
            ...(category === 'image' && scorer.name === 'local' ? { image_quality: await analyzeImage(bytes, { palette: false }) } : {}),
            // The hosted model cannot hear the recording: its measured volume goes into the prompt
            // with the transcript (D65; a silent file is seen as one). The local rules measure it themselves.
            ...(category === 'audio' && scorer.name === 'bedrock' ? { mean_volume_db: await meanVolumeOf(bytes) } : {}),
          },
        });
      };
      score = await ask().catch(release);
    }
  }
  const fallbackMeta = { content_type: upload.content_type, size_bytes: bytes.length, content_hash: '' };
  const { stored, item } = await writePart(
    sub,
    upload.file_id,
    {
      metadata: metadata ?? fallbackMeta,
      score: JSON.parse(JSON.stringify(score)),
      worker_region: region,
      ...trustAttrs,
      ...(transcription && !part.transcription ? { transcription: JSON.parse(JSON.stringify(transcription)) } : {}),
    },
    'score',
  );
  if (!stored) {
    await tryVerdictOn(item);
    return 'skipped';
  }
  // Completed above unless this file was refused after the round completed (nothing to complete).
  if (upload.mode === 'presigned' && awaitsFiles(sub) && !triedCompletion) await completeIfAllLanded(sub.id, sub.round!);
  await tryVerdictOn(item);
  return 'stored';
}
