/**
 * Fault injection for the local runtime (D64, D66): `LOCAL_FAULT_SCORING_FAILURES=N` makes the
 * first N scoring attempts of the process fail as a provider outage would, so the recovery path
 * (retry with backoff, dead-letter queue, redrive) can be exercised from outside. Read only when
 * RUNTIME=local; the deployed stack never reads it.
 */
import { config } from '../config';

export class ScoringProviderError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'ScoringProviderError';
  }
}

let injected = 0;

/** Throws while fewer than LOCAL_FAULT_SCORING_FAILURES attempts have failed (local runtime only). */
export function injectScoringFault(): void {
  if (config().runtime !== 'local') return;
  const n = Number(process.env.LOCAL_FAULT_SCORING_FAILURES ?? 0);
  if (!Number.isInteger(n) || n <= 0 || injected >= n) return;
  injected++;
  throw new ScoringProviderError(`injected scoring provider failure ${injected} of ${n} (LOCAL_FAULT_SCORING_FAILURES)`);
}

/** How many attempts failed by injection so far (tests). */
export function injectedScoringFaults(): number {
  return injected;
}

/** Tests: start counting again. */
export function resetInjectedScoringFaults(): void {
  injected = 0;
}
