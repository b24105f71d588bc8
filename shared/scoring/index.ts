/**
 * Scoring entry points (D26–D28). Typical pipeline use:
 *
 *   const md = await measure(bytes, contentType, uploadFields);          // shared/media/metadata
 *   const pre = precheck(job, md, approvedHashes);                        // D26, no AI call
 *   const result = pre ?? (await scorerFor(env, runtime).score({ job, file: { content_type, bytes, s3, metadata: md } }));
 *   const status = verdictFor(result, job.min_star_rating, attempt);      // D27
 *
 * Provider choice (`scorerFor`): the test environment always uses `sandbox` (always 4 stars, D28/D40
 * — the spec promises it, so no override applies there); live uses `local` under the embedded
 * runtime and `bedrock` on AWS; env SCORING_PROVIDER (`local` | `bedrock` | `sandbox`) overrides
 * the live choice.
 */
import { BedrockScorer, type BedrockScorerOptions } from './bedrock';
import { LocalScorer } from './local';
import { SandboxScorer } from './sandbox';
import type { Scorer } from './types';

export * from './types';
export { precheck, precheckRejection, type PrecheckFailure } from './precheck';
export { verdict, verdictFor, DEFAULT_THRESHOLD, type Verdict } from './verdict';
export { LocalScorer, LOCAL_RULES_VERSION, imageQualityScore } from './local';
export { SandboxScorer } from './sandbox';
export {
  BedrockScorer,
  BedrockOutputError,
  DEFAULT_BEDROCK_MODEL_ID,
  parseConverseOutput,
  starFromDimensions,
  buildPrompt,
  extractJson,
  type ConverseClient,
} from './bedrock';

export function scorerFor(
  env: 'live' | 'test',
  runtime: 'local' | 'aws',
  opts: { provider?: string; bedrock?: BedrockScorerOptions } = {},
): Scorer {
  if (env === 'test') return new SandboxScorer();
  const override = (opts.provider ?? process.env.SCORING_PROVIDER ?? '').trim().toLowerCase();
  if (override === 'local') return new LocalScorer();
  if (override === 'sandbox') return new SandboxScorer();
  if (override === 'bedrock') return new BedrockScorer(opts.bedrock);
  if (override) throw new Error(`SCORING_PROVIDER must be local, bedrock or sandbox, not ${JSON.stringify(override)}`);
  return runtime === 'local' ? new LocalScorer() : new BedrockScorer(opts.bedrock);
}
