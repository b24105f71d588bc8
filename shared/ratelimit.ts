/**
 * Rate limits (D13): fixed per-minute and per-hour windows per API key (or worker, or source IP
 * for signups), counted with one atomic ADD per request on the hour's item. The headers describe
 * the window that binds first.
 */
import { UpdateCommand } from '@aws-sdk/lib-dynamodb';
import { db, tableName } from './db/client';
import { keys } from './db/keys';
import { now } from './clock';

export interface Limits {
  perMinute: number;
  perHour: number;
}

export const TIERS = {
  free: { perMinute: 60, perHour: 600 },
  standard: { perMinute: 100, perHour: 1000 },
  signup: { perMinute: Number.MAX_SAFE_INTEGER, perHour: 10 },
} satisfies Record<string, Limits>;

export interface RateDecision {
  allowed: boolean;
  limit: number;
  remaining: number;
  /** Unix seconds when the binding window resets. */
  reset: number;
  retryAfter: number;
  /** First request of this minute (used to throttle last_used_at writes). */
  firstInMinute: boolean;
}

/**
 * One write per request: the hour's item counts the hour (`n`) and each of its minutes (`m<i>`), so
 * a single UpdateItem returns both windows' counts.
 */
async function incr(principal: string, hourStart: number, minuteIndex: number): Promise<{ m: number; h: number }> {
  const out = await db().send(
    new UpdateCommand({
      TableName: tableName(),
      Key: keys.rateWindow(principal, 'h', hourStart),
      UpdateExpression: 'ADD #n :one, #m :one SET #ttl = if_not_exists(#ttl, :ttl)',
      ExpressionAttributeNames: { '#n': 'n', '#m': `m${minuteIndex}`, '#ttl': 'ttl' },
      ExpressionAttributeValues: { ':one': 1, ':ttl': hourStart + 3600 + 60 },
      ReturnValues: 'UPDATED_NEW',
    }),
  );
  const a = out.Attributes ?? {};
  return { h: Number(a.n ?? 1), m: Number(a[`m${minuteIndex}`] ?? 1) };
}

/** Count one request and decide. `limits` may be a promise resolved in parallel (tier lookup). */
export async function consume(principal: string, limits: Limits | Promise<Limits>): Promise<RateDecision> {
  const t = Math.floor(now().getTime() / 1000);
  const m0 = t - (t % 60);
  const h0 = t - (t % 3600);
  const [{ m, h }, l] = await Promise.all([incr(principal, h0, Math.floor((t - h0) / 60)), limits]);
  const minuteLeft = l.perMinute - m;
  const hourLeft = l.perHour - h;
  // The binding window is the one with fewer requests left (ties: the one resetting later).
  const minuteBinds = minuteLeft < hourLeft;
  const limit = minuteBinds ? l.perMinute : l.perHour;
  const reset = minuteBinds ? m0 + 60 : h0 + 3600;
  const remaining = Math.max(0, Math.min(minuteLeft, hourLeft));
  const allowed = m <= l.perMinute && h <= l.perHour;
  let retryAfter = 0;
  if (!allowed) {
    const untilMinute = m > l.perMinute ? m0 + 60 - t : 0;
    const untilHour = h > l.perHour ? h0 + 3600 - t : 0;
    retryAfter = Math.max(1, untilMinute, untilHour);
  }
  return { allowed, limit, remaining, reset, retryAfter, firstInMinute: m === 1 };
}
