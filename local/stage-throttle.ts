/**
 * The REST API stage's method throttling (lib/api.ts: 200 requests a second, bursts of 400), as the
 * local HTTP front applies it: each method of the stage (a route) has its own token bucket. Paths
 * no route takes share one bucket here; deployed, each resource's ANY method has its own, so the
 * local front is the stricter for them. A bucket is full at start, holding `burst` tokens and refilled at
 * `ratePerSecond`; a request takes one, and one that finds none gets API Gateway's THROTTLED
 * response (429 with Retry-After 1, shared/http/edge.ts) without reaching its function. API
 * Gateway applies its throttles "on a best-effort basis" and may let a few more through; here the
 * bucket is exact. The account's own limit (10,000 a second per region) is far above what one
 * machine sends and is not emulated.
 */
import type { STAGE_THROTTLE } from '../shared/http/edge';

export type StageThrottle = { [K in keyof typeof STAGE_THROTTLE]: number };

/** The buckets as one check: `method` (e.g. `GET /v1/jobs/{job_id}`) → whether it may go on. `now` is the clock (tests move it). */
export function stageThrottle(limits: StageThrottle, now: () => number = Date.now): (method: string) => boolean {
  const buckets = new Map<string, { tokens: number; at: number }>();
  return (method) => {
    const t = now();
    let b = buckets.get(method);
    if (!b) buckets.set(method, (b = { tokens: limits.burst, at: t }));
    b.tokens = Math.min(limits.burst, b.tokens + ((t - b.at) / 1000) * limits.ratePerSecond);
    b.at = t;
    if (b.tokens < 1) return false;
    b.tokens -= 1;
    return true;
  };
}
