/**
 * D27 verdict. Threshold T = min_star_rating (default 3).
 * - score ≥ T → approved
 * - score = T − 1 on a first attempt, with T ≥ 2 → retry_pending (one /retry allowed)
 * - otherwise, and for any failed retry → rejected
 * D26 pre-check rejections are final: use `verdictFor`, which never turns them into retry_pending.
 */
import type { ScoreResult } from './types';

export type Verdict = 'approved' | 'retry_pending' | 'rejected';

export const DEFAULT_THRESHOLD = 3;

/**
 * @param score    integer stars 1..5
 * @param threshold T, integer 1..5 (null/undefined → 3)
 * @param attempt  1 for the first attempt, 2 for the retry
 */
export function verdict(score: number, threshold: number | null | undefined = DEFAULT_THRESHOLD, attempt = 1): Verdict {
  const t = threshold ?? DEFAULT_THRESHOLD;
  if (!Number.isInteger(score) || score < 1 || score > 5) throw new RangeError(`score must be an integer 1..5, got ${score}`);
  if (!Number.isInteger(t) || t < 1 || t > 5) throw new RangeError(`threshold must be an integer 1..5, got ${t}`);
  if (!Number.isInteger(attempt) || attempt < 1) throw new RangeError(`attempt must be an integer ≥ 1, got ${attempt}`);
  if (score >= t) return 'approved';
  if (score === t - 1 && attempt === 1 && t >= 2) return 'retry_pending';
  return 'rejected';
}

/** Verdict for a provider result; pre-check rejections (D26) are always `rejected`. */
export function verdictFor(result: ScoreResult, threshold: number | null | undefined, attempt = 1): Verdict {
  if (result.precheck_rejected) return 'rejected';
  return verdict(result.ai_star_rating, threshold, attempt);
}
