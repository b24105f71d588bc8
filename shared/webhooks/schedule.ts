/**
 * D37 retry schedule: after the first attempt fails, retries 5 s, 5 min, 30 min, 2 h, 5 h, 10 h and
 * 10 h later (each ±10 % jitter), 8 attempts over about 27.6 hours; then the delivery is `failed`.
 * A `Retry-After` on 429/503 pushes the next attempt later (never earlier), capped at 24 h.
 * `WEBHOOK_RETRY_SCALE` (local runtime only) shrinks the schedule's delays for tests (not Retry-After).
 */
import { DAY_MS } from '../clock';

const S = 1000;
const M = 60 * S;
const H = 60 * M;
export const RETRY_DELAYS_MS = [5 * S, 5 * M, 30 * M, 2 * H, 5 * H, 10 * H, 10 * H] as const;
export const MAX_ATTEMPTS = RETRY_DELAYS_MS.length + 1;
export const JITTER = 0.1;
export const RETRY_AFTER_CAP_MS = DAY_MS;
/** D37: an endpoint whose deliveries have only failed for this long is disabled. */
export const FAILING_DISABLE_MS = 5 * DAY_MS;

/**
 * Delay before retry number `retryIndex` (0 = the first retry), or null when the schedule is spent.
 * `random` in [0, 1) (injectable for tests).
 */
export function retryDelayMs(
  retryIndex: number,
  opts: { scale?: number; retryAfterMs?: number | null; random?: () => number } = {},
): number | null {
  const base = RETRY_DELAYS_MS[retryIndex];
  if (base === undefined) return null;
  const jitter = 1 - JITTER + 2 * JITTER * (opts.random ?? Math.random)();
  // The local scale shrinks the schedule, not what the receiver asked for.
  let delay = base * jitter * (opts.scale ?? 1);
  if (opts.retryAfterMs != null) delay = Math.max(delay, Math.min(opts.retryAfterMs, RETRY_AFTER_CAP_MS));
  return Math.round(delay);
}

/** `Retry-After`: delta seconds or an HTTP date; null when absent or unparseable. */
export function parseRetryAfter(value: string | undefined, at: Date): number | null {
  if (!value) return null;
  const v = value.trim();
  if (/^\d+$/.test(v)) return Number(v) * 1000;
  const t = Date.parse(v);
  return Number.isNaN(t) ? null : Math.max(0, t - at.getTime());
}
