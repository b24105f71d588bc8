/**
 * The scoring provider interface (D28). Every provider returns integer stars 1..5 and the three
 * dimensions of the `submission.scored` event (relevance, quality, instruction_compliance).
 */
import type { ImageQuality } from '../media/image-quality';
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
  image_quality?: ImageQuality;
  /** audio/video loudness when measured (annotate-image.ts `loudness`) */
  mean_volume_db?: number | null;
  /** transcript text, when a later stage provides one (audio to Bedrock) */
  transcript?: string | null;
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

export interface ScoreResult {
  ai_star_rating: number;
  dimensions: Dimensions;
  ai_reasoning: string;
  provider: ProviderName;
  /** model id for bedrock; rule-table version for local */
  model?: string;
  /** D26: a pre-scoring rejection: final, no AI call, no charge */
  precheck_rejected?: boolean;
}

export interface Scorer {
  readonly name: ProviderName;
  score(input: ScoringInput): Promise<ScoreResult>;
}

export const clampStar = (n: number): number => Math.max(1, Math.min(5, Math.round(n)));
