/**
 * The submission item and its two views (worker, buyer).
 *
 * Statuses: the spec's four (`pending_score`, `approved`, `rejected`, `retry_pending`) plus the
 * worker-side ones that buyers never see (D24): `awaiting_upload` (accepted, slots reserved),
 * `withdrawn` (the worker gave the reservation back), `expired` (the reservation ran out) and
 * `cancelled` (the job was cancelled before the upload).
 * A submission carries the buyer-facing index attributes (GSI1 job list, GSI2 tenant list) only
 * from its upload on, so buyer lists never contain worker-only statuses; the worker history index
 * (GSI3) is there from the accept.
 *
 * Upload rounds: every upload (the first, a replaced one, the D27 retry) gets a new `round` and
 * new file ids; its objects live under `uploads/<sub>/<round>/`. `parts[file_id]` collects what the
 * two pipeline stages measured for that file (D54 fan-in); a stage's result for a file of an older
 * round is ignored.
 */
import { gsi } from '../db/keys';
import type { Category } from '../jobs/model';
import type { Env } from '../types';
import type { Dimensions, ReasonCode, ScoreResult } from '../scoring/types';
import type { TranscriptionState } from '../speech/types';

export const WORKER_ONLY_STATUSES = ['awaiting_upload', 'withdrawn', 'expired', 'cancelled'] as const;
export const BUYER_STATUSES = ['pending_score', 'approved', 'rejected', 'retry_pending'] as const;
export type SubmissionStatus = (typeof WORKER_ONLY_STATUSES)[number] | (typeof BUYER_STATUSES)[number];

/** D23: a reservation lasts 60 minutes; the D27 retry window is as long. */
export const RESERVATION_MS = 60 * 60_000;

export interface PlannedUpload {
  file_id: string;
  key: string;
  filename: string;
  content_type: string;
  size_bytes: number;
  mode: 'direct' | 'presigned';
}

export interface DeviceFields {
  captured_at?: string | null;
  device_model?: string | null;
  device_os?: string | null;
  app_version?: string | null;
  latitude?: number | null;
  longitude?: number | null;
}

/** What the stages wrote for one file. */
export interface FilePart {
  metadata?: Record<string, unknown> & { content_hash: string; size_bytes: number; content_type: string };
  worker_region?: string | null;
  score?: ScoreResult;
  annotations?: Record<string, unknown> | null;
  keyframes?: { index: number; timestamp_seconds: number; width: number | null; height: number | null; key: string; perceptual_hash?: string | null }[] | null;
  /** D69: the image's 64-bit perceptual hash (16 hex), null for other media or undecodable bytes */
  perceptual_hash?: string | null;
  /** D70: GPS inside the job's radius (true), no GPS (false), the job has no point (null) */
  location_verified?: boolean | null;
  /** the bytes failed the D25 checks when they landed (pre-signed uploads) */
  upload_error?: { code: string; message: string } | null;
  /** D65: the speech of an audio file or video sound track (the score waits while pending) */
  transcription?: TranscriptionState;
}

export type SubmissionItem = Record<string, unknown> & {
  id: string;
  job_id: string;
  worker_id: string;
  org_id: string;
  environment: Env;
  status: SubmissionStatus;
  attempt: number;
  files_expected: number;
  /** slots this submission holds in files_pending (set at upload) */
  slots_held?: number;
  reserved_until: string | null;
  round: string | null;
  /** D27: the round a retry planned (set with its plan; the retry completes into attempt 2). */
  retry_round?: string | null;
  uploads: PlannedUpload[];
  device: DeviceFields;
  parts: Record<string, FilePart>;
  category: Category | null;
  ai_star_rating: number | null;
  ai_reasoning: string | null;
  dimensions: Dimensions | null;
  /** D68: why the verdict is what it is (approved: []) */
  reason_codes?: ReasonCode[];
  file_ids: string[];
  submitted_at: string | null;
  scored_at: string | null;
  created_at: string;
};

/**
 * A retry is planned and has not completed (D27): the submission's files are the retry's, which no
 * verdict covers yet (they may still be landing, or never arrive).
 */
export const retryInFlight = (s: Pick<SubmissionItem, 'retry_round' | 'round' | 'attempt'>): boolean =>
  s.retry_round != null && s.retry_round === s.round && Number(s.attempt) < 2;

/**
 * GSI attributes by audience: the worker's history from the accept, the buyer's lists from the
 * upload, by its `submitted_at` (`submittedAt`, the upload that puts it in them).
 */
export function submissionIndexes(s: Pick<SubmissionItem, 'org_id' | 'environment' | 'job_id' | 'worker_id' | 'id'>, submittedAt: string | null = null) {
  const all = gsi.submission(s.org_id, s.environment, s.job_id, s.worker_id, s.id, submittedAt);
  return {
    worker: { GSI3PK: all.GSI3PK!, GSI3SK: all.GSI3SK! },
    buyer: { GSI1PK: all.GSI1PK!, GSI1SK: all.GSI1SK!, GSI2PK: all.GSI2PK!, GSI2SK: all.GSI2SK! },
  };
}

const first = (s: SubmissionItem) => s.uploads?.[0];
const totalSize = (s: SubmissionItem) => (s.uploads ?? []).reduce((a, u) => a + Number(u.size_bytes ?? 0), 0);

/**
 * D68: the verdict's reason codes; null while there is no verdict (awaiting upload, pending_score)
 * and for a submission rejected without one (its job was cancelled before it was scored).
 */
export function reasonCodesOf(s: SubmissionItem): ReasonCode[] | null {
  if (!['approved', 'rejected', 'retry_pending'].includes(s.status)) return null;
  if ((s as { reason_codes?: unknown }).reason_codes === null) return null;
  return s.reason_codes ?? [];
}

/** The worker's view (D45): the buyer fields plus the reservation and upload state. */
export function presentWorkerSubmission(s: SubmissionItem) {
  const errors = Object.entries(s.parts ?? {})
    .map(([fileId, p]) => (p.upload_error ? { file_id: fileId, ...p.upload_error } : null))
    .filter((x) => x !== null);
  return {
    object: 'submission' as const,
    id: s.id,
    job_id: s.job_id,
    worker_id: s.worker_id,
    status: s.status,
    attempt: Number(s.attempt ?? 1),
    files_expected: Number(s.files_expected),
    reserved_until: s.reserved_until ?? null,
    files: (s.uploads ?? []).map((u) => ({ file_id: u.file_id, filename: u.filename, content_type: u.content_type, size_bytes: u.size_bytes })),
    upload_errors: errors,
    ai_star_rating: s.ai_star_rating ?? null,
    ai_reasoning: s.ai_reasoning ?? null,
    dimensions: s.dimensions ?? null,
    reason_codes: reasonCodesOf(s),
    payout_cents: (s.payout_cents as number | undefined) ?? null,
    submitted_at: s.submitted_at ?? null,
    scored_at: s.scored_at ?? null,
    /** D71: the buyer's override of the verdict, or null; the buyer's private note is not shown */
    override: workerOverride(s.override),
    created_at: s.created_at,
  };
}

/** What a worker sees of an override: the decision, its standard reason and when (not the buyer's note). */
function workerOverride(o: unknown): Record<string, unknown> | null {
  if (!o || typeof o !== 'object') return null;
  const { note: _note, ...shown } = o as Record<string, unknown>;
  return shown;
}

/** The buyer's view (spec "Submission"). `file_url` is set by the caller for approved submissions. */
export function presentSubmission(s: SubmissionItem, fileUrl: string | null = null) {
  const u = first(s);
  return {
    id: s.id,
    object: 'submission' as const,
    job_id: s.job_id,
    worker_id: s.worker_id,
    status: s.status,
    ai_star_rating: s.ai_star_rating ?? null,
    ai_reasoning: s.ai_reasoning ?? null,
    dimensions: s.dimensions ?? null,
    reason_codes: reasonCodesOf(s),
    file_url: fileUrl,
    file_ids: s.file_ids ?? [],
    content_type: u?.content_type ?? null,
    size_bytes: u ? totalSize(s) : null,
    files_count: (s.uploads ?? []).length,
    submitted_at: s.submitted_at ?? null,
    scored_at: s.scored_at ?? null,
    /** D71: the buyer's override of the verdict, or null */
    override: (s.override as Record<string, unknown> | undefined) ?? null,
  };
}
