/**
 * The scoring provider interface (D28). Every provider returns integer stars 1..5 and the three
 * dimensions of the `submission.scored` event (relevance, quality, instruction_compliance).
 */
import type { ImageMeasures } from '../media/image-quality';
import type { MediaMetadata } from '../media/metadata';

/** The job fields scoring reads (D17 echo names). */
export interface ScoringJob {
  type: 'data_collection' | 'feedback';
  description: string;
  scoring_criteria?: string | null;
  worker_guidelines?: string | null;
  accepted_formats: readonly string[];
  min_width?: number | null;
  min_height?: number | null;
  min_duration_seconds?: number | null;
  max_duration_seconds?: number | null;
  /** D27 threshold; default 3 */
  min_star_rating?: number | null;
}

export interface S3ObjectRef {
  bucket: string;
  key: string;
  /** account id, when the bucket belongs to another account */
  bucketOwner?: string;
}

/** The metadata fields scoring needs (a full MediaMetadata fits). */
export type ScoringMetadata = Pick<MediaMetadata, 'content_type' | 'width' | 'height' | 'duration_seconds'> &
  Partial<Omit<MediaMetadata, 'content_type' | 'width' | 'height' | 'duration_seconds'>>;

export interface ScoringFile {
  content_type: string;
  /** the bytes (images are scored from bytes; the local scorer needs them for images) */
  bytes?: Buffer;
  /** or a local path */
  path?: string;
  /** where the object lives (video input for Bedrock) */
  s3?: S3ObjectRef;
  metadata: ScoringMetadata;
  /** precomputed image analysis (saves a decode when annotation already ran) */
  image_quality?: ImageMeasures;
  /** audio/video loudness when measured (annotate-image.ts `loudness`) */
  mean_volume_db?: number | null;
  /** transcript text of the speech (Amazon Transcribe, D65), for audio and video sound tracks */
  transcript?: string | null;
  /** why there is no transcript (no speech, no recogniser), said in the prompt */
  transcript_unavailable?: string | null;
  /** The transcript given is the beginning of a longer one (the stored transcript is bounded). */
  transcript_truncated?: boolean;
  original_filename?: string | null;
}

export interface ScoringInput {
  job: ScoringJob;
  file: ScoringFile;
  /**
   * Sandbox scenarios only (test environment, beyond the spec, docs/sandbox.md): the outcome the
   * simulated worker asked for. Absent → the sandbox's 4 stars (D28).
   */
  sandboxDirective?: SandboxDirective | null;
}

export type SandboxDirective = 'approve' | 'retry' | 'reject';

export interface Dimensions {
  relevance: number;
  quality: number;
  instruction_compliance: number;
}

export type ProviderName = 'local' | 'sandbox' | 'bedrock' | 'precheck';

/**
 * Reason codes (D68): why a verdict is what it is, in a form a program can act on. Every verdict
 * carries `reason_codes` (approved: `[]`); a `retry_pending` verdict names what to fix.
 * - `low_relevance`, `low_quality`, `instructions_not_followed`: the matching dimension scored
 *   below the job's threshold (`reasonCodesFromDimensions`);
 * - `resolution_too_low`, `duration_out_of_bounds`, `duplicate` (bytes identical to an approved
 *   file): pre-checks before any model runs;
 * - `near_duplicate`, `location_mismatch`: the trust pre-checks (perceptual hash, GPS);
 * - `policy_violation`: NSFW or violence score at or above the policy limit;
 * - `unreadable_media`: the bytes do not decode as their type.
 */
export const REASON_CODES = [
  'low_relevance',
  'low_quality',
  'instructions_not_followed',
  'resolution_too_low',
  'duration_out_of_bounds',
  'duplicate',
  'near_duplicate',
  'location_mismatch',
  'policy_violation',
  'unreadable_media',
] as const;
export type ReasonCode = (typeof REASON_CODES)[number];

/** Codes in the order of REASON_CODES, each once. */
export function sortReasonCodes(codes: Iterable<ReasonCode>): ReasonCode[] {
  const set = new Set(codes);
  return REASON_CODES.filter((c) => set.has(c));
}

/** The dimensions that fell below the threshold T (default 3), as codes. */
export function reasonCodesFromDimensions(d: Dimensions | null, threshold: number | null | undefined = 3): ReasonCode[] {
  const t = threshold ?? 3;
  const out: ReasonCode[] = [];
  if (!d) return out;
  if (d.relevance < t) out.push('low_relevance');
  if (d.quality < t) out.push('low_quality');
  if (d.instruction_compliance < t) out.push('instructions_not_followed');
  return out;
}

export interface ScoreResult {
  ai_star_rating: number;
  /** What a model judged; null when no model judged the file (a pre-check rejection, D26). */
  dimensions: Dimensions | null;
  ai_reasoning: string;
  provider: ProviderName;
  /** model id for bedrock; rule-table version for local */
  model?: string;
  /** D26: a pre-scoring rejection: final, no AI call, no charge */
  precheck_rejected?: boolean;
  /** D68: what fell short for this file (empty when nothing did) */
  reason_codes: ReasonCode[];
}

export interface Scorer {
  readonly name: ProviderName;
  score(input: ScoringInput): Promise<ScoreResult>;
}

export const clampStar = (n: number): number => Math.max(1, Math.min(5, Math.round(n)));
