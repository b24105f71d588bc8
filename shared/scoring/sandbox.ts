/** `sandbox` scoring provider (D28, D40): always 4 stars, dimensions 4/4/4, no analysis. */
import type { ScoreResult, Scorer } from './types';

export class SandboxScorer implements Scorer {
  readonly name = 'sandbox' as const;
  async score(): Promise<ScoreResult> {
    return {
      ai_star_rating: 4,
      dimensions: { relevance: 4, quality: 4, instruction_compliance: 4 },
      ai_reasoning: 'Sandbox scoring: synthetic result, always 4 stars (test environment).',
      provider: 'sandbox',
      model: 'sandbox',
    };
  }
}
