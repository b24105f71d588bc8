/**
 * D26 pre-scoring checks: reject with 1 star, no AI call, no charge, when
 * - an image or video is below min_width or min_height (both orientations are NOT tried: the
 *   stored bytes' width/height are compared as they are, D55),
 * - an audio or video duration is outside [min_duration_seconds, max_duration_seconds],
 * - the bytes are identical to a file already approved for the job (`content_hash`; the caller
 *   finds prior hashes in DynamoDB and may pass them here, or check itself).
 * A dimension or duration that could not be measured is not a reason to reject here (scoring
 * goes on and the provider judges the file).
 */
import { categoryOf } from '../media/sniff';
import { sortReasonCodes, type ReasonCode, type ScoreResult, type ScoringJob, type ScoringMetadata } from './types';

/** One failed pre-check: its reason code (D68) and a sentence for the worker. */
export interface PrecheckFailure {
  code: ReasonCode;
  reason: string;
}

/**
 * The result of a pre-check rejection (D26): 1 star, final, no model call, no charge. Every
 * pre-check (these, the trust checks, undecodable bytes) ends here, so they all read alike. No
 * model judged relevance, quality or compliance, so `dimensions` is null (the reasoning says why).
 */
export function precheckRejection(failures: PrecheckFailure[]): ScoreResult {
  return {
    ai_star_rating: 1,
    dimensions: null,
    ai_reasoning: `Rejected before scoring: ${failures.map((f) => f.reason).join('; ')}.`,
    provider: 'precheck',
    precheck_rejected: true,
    reason_codes: sortReasonCodes(failures.map((f) => f.code)),
  };
}

export function precheck(
  job: ScoringJob,
  metadata: ScoringMetadata,
  priorApprovedHashes?: Iterable<string> | null,
): ScoreResult | null {
  const reasons: PrecheckFailure[] = [];
  const category = metadata.category ?? categoryOf(metadata.content_type);

  if (category === 'image' || category === 'video') {
    const { width, height } = metadata;
    if (job.min_width && width !== null && width !== undefined && width < job.min_width) {
      reasons.push({ code: 'resolution_too_low', reason: `width ${width}px is below the job's minimum of ${job.min_width}px` });
    }
    if (job.min_height && height !== null && height !== undefined && height < job.min_height) {
      reasons.push({ code: 'resolution_too_low', reason: `height ${height}px is below the job's minimum of ${job.min_height}px` });
    }
  }
  if (category === 'audio' || category === 'video') {
    const d = metadata.duration_seconds;
    if (d !== null && d !== undefined) {
      if (job.min_duration_seconds && d < job.min_duration_seconds) {
        reasons.push({ code: 'duration_out_of_bounds', reason: `duration ${fmt(d)}s is shorter than the job's minimum of ${job.min_duration_seconds}s` });
      }
      if (job.max_duration_seconds && d > job.max_duration_seconds) {
        reasons.push({ code: 'duration_out_of_bounds', reason: `duration ${fmt(d)}s is longer than the job's maximum of ${job.max_duration_seconds}s` });
      }
    }
  }
  if (priorApprovedHashes && metadata.content_hash) {
    for (const h of priorApprovedHashes) {
      if (h === metadata.content_hash) {
        reasons.push({ code: 'duplicate', reason: 'the file is identical to a file already approved for this job' });
        break;
      }
    }
  }
  if (reasons.length === 0) return null;
  return precheckRejection(reasons);
}

const fmt = (n: number) => (Number.isInteger(n) ? String(n) : n.toFixed(2));
