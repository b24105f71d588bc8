/**
 * `sandbox` scoring provider (D28, D40): 4 stars, dimensions 4/4/4, no analysis. The `mixed`
 * sandbox scenario (docs/sandbox.md, beyond the spec) asks for a first attempt one star below the
 * job's threshold (→ retry_pending) or a 1-star rejection through `sandboxDirective`.
 */
import { reasonCodesFromDimensions, type SandboxDirective, type ScoreResult, type Scorer, type ScoringInput } from './types';

const RESULTS: Record<SandboxDirective, { stars: number; reasoning: string }> = {
  approve: { stars: 4, reasoning: 'Sandbox scoring: synthetic result, always 4 stars (test environment).' },
  retry: { stars: 2, reasoning: 'Sandbox scenario "mixed": a synthetic 2-star result, so the simulated worker retries once.' },
  reject: { stars: 1, reasoning: 'Sandbox scenario "mixed": a synthetic 1-star rejection.' },
};

export class SandboxScorer implements Scorer {
  readonly name = 'sandbox' as const;
  async score(input?: ScoringInput): Promise<ScoreResult> {
    const threshold = input?.job.min_star_rating ?? 3;
    const base = RESULTS[input?.sandboxDirective ?? 'approve'];
    // The retry is one star below the job's threshold, whatever it is (D27: retry_pending).
    const r = input?.sandboxDirective === 'retry' ? { stars: Math.max(1, threshold - 1), reasoning: `Sandbox scenario "mixed": a synthetic result one star below the threshold (${Math.max(1, threshold - 1)}), so the simulated worker retries once.` } : base;
    const dimensions = { relevance: r.stars, quality: r.stars, instruction_compliance: r.stars };
    return {
      ai_star_rating: r.stars,
      dimensions,
      ai_reasoning: r.reasoning,
      provider: 'sandbox',
      model: 'sandbox',
      // D68: the synthetic dimensions below the threshold (none for the 4-star default).
      reason_codes: r.stars >= threshold ? [] : reasonCodesFromDimensions(dimensions, threshold),
    };
  }
}
