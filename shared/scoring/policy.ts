/**
 * Content policy (D67): a file whose NSFW score, or violence score where a model measured one, is
 * at or above POLICY_LIMIT is rejected with 1 star and `policy_violation`, whatever it scored
 * otherwise: no File, no charge, and its `submission.scored` event carries `annotations: null`.
 * Images are judged on their `safety` block; videos on the worst of their annotated keyframes.
 */
import { precheckRejection } from './precheck';
import type { ScoreResult } from './types';

export const POLICY_LIMIT = 0.85;

type Safety = { nsfw_score?: number | null; violence_score?: number | null } | null | undefined;

export interface PolicyFinding {
  measure: 'nsfw_score' | 'violence_score';
  score: number;
}

function worst(safety: Safety): PolicyFinding | null {
  let found: PolicyFinding | null = null;
  for (const measure of ['nsfw_score', 'violence_score'] as const) {
    const v = safety?.[measure];
    if (typeof v === 'number' && v >= POLICY_LIMIT && (!found || v > found.score)) found = { measure, score: v };
  }
  return found;
}

/** The policy finding of one file's annotations, or null. */
export function policyFinding(annotations: Record<string, unknown> | null | undefined): PolicyFinding | null {
  if (!annotations) return null;
  if (annotations.type === 'video') {
    const frames = (annotations.keyframes as { annotations?: { safety?: Safety } | null }[] | null) ?? [];
    return frames.map((k) => worst(k.annotations?.safety)).reduce<PolicyFinding | null>((a, b) => (b && (!a || b.score > a.score) ? b : a), null);
  }
  return worst(annotations.safety as Safety);
}

/** D67: 1 star, final; the dimensions the model gave, when one scored the file, are kept as they were. */
export function policyRejection(f: PolicyFinding, scored?: ScoreResult): ScoreResult {
  const what = f.measure === 'nsfw_score' ? 'sexual content' : 'violent content';
  return {
    ...precheckRejection([{ code: 'policy_violation', reason: `` }]),
    dimensions: scored?.dimensions ?? null,
    ai_reasoning: `Rejected under the content policy: the file was classified as ${what} (${f.measure} ${f.score} ≥ ${POLICY_LIMIT}).`,
  };
}
