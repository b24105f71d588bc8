/**
 * `sandbox` scoring provider (D28, D40): 4 stars, dimensions 4/4/4, no analysis. The `mixed`
 * sandbox scenario (docs/sandbox.md, beyond the spec) asks for a 2-star first attempt (→
 * retry_pending under the default threshold) or a 1-star rejection through `sandboxDirective`.
 */
import type { ScoreResult, Scorer, ScoringInput } from './types';

const RESULTS = {
  approve: { stars: 4, reasoning: 'Sandbox scoring: synthetic result, always 4 stars (test environment).' },
  retry: { stars: 2, reasoning: 'Sandbox scenario "mixed": a synthetic 2-star result, so the simulated worker retries once.' },
  reject: { stars: 1, reasoning: 'Sandbox scenario "mixed": a synthetic 1-star rejection.' },
} as const;

export class SandboxScorer implements Scorer {
  readonly name = 'sandbox' as const;
  async score(input?: ScoringInput): Promise<ScoreResult> {
    const r = RESULTS[input?.sandboxDirective ?? 'approve'];
    return {
      ai_star_rating: r.stars,
      dimensions: { relevance: r.stars, quality: r.stars, instruction_compliance: r.stars },
      ai_reasoning: r.reasoning,
      provider: 'sandbox',
      model: 'sandbox',
    };
  }
}
