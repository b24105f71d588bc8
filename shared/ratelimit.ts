/**
 * Rate limits (D13): fixed per-minute and per-hour windows per API key (or worker, or source IP
 * for signups). The headers describe the window that binds first.
 *
 * Where the count lives (issue 15: one write per request, and none of its own step):
 * - An API key's or worker token's requests are counted on the secret item authentication reads,
 *   by the same conditional UpdateItem that authenticates (shared/auth/authenticate.ts): the item
 *   holds the hour it counts (`rl_hour`), the hour's count (`rl_n`) and each minute's (`rl_m<i>`).
 * - While a key has two live secrets (the 24 h overlap of a rotation, D6) both secrets count on the
 *   key's own window item (`consume('K#<key id>')`), so the limit stays one per key; the rotation
 *   carries the hour's count over to it (shared/api-keys). Signups count per source IP there too.
 *
 * The windows count the requests served: a request the limits refuse is counted (that is how the
 * decision is taken in the one write) and then taken back (`uncount`), so a client that keeps
 * knocking after a 429 does not spend its hour on refusals. The count never falls below the
 * requests served (each refusal takes back only its own count), so no more than the limit passes.
 * A take-back that fails leaves the count one too high, never too low.
 */
import { UpdateCommand } from '@aws-sdk/lib-dynamodb';
import { db, tableName } from './db/client';
import { keys } from './db/keys';
import { retryingConflicts } from './db/conflicts';
import { now } from './clock';
import { logger } from './logger';

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
}

/** The windows of an instant: its Unix second, hour start and the minute's index in the hour. */
export interface Windows {
  t: number;
  hourStart: number;
  minuteIndex: number;
}

/** Counts of the two windows including this request. */
export interface Counts extends Windows {
  m: number;
  h: number;
}

export function windowsAt(ms = now().getTime()): Windows {
  const t = Math.floor(ms / 1000);
  const hourStart = t - (t % 3600);
  return { t, hourStart, minuteIndex: Math.floor((t - hourStart) / 60) };
}

/** Names of the counter attributes a secret item carries (kept in one place). */
export const SECRET_COUNTER = {
  hour: 'rl_hour',
  total: 'rl_n',
  minute: (i: number) => `rl_m${i}`,
  isMinute: (name: string) => /^rl_m\d+$/.test(name),
  minuteIndexOf: (name: string) => Number(name.slice('rl_m'.length)),
} as const;

/**
 * One write per request on a window item: the hour's item counts the hour (`n`) and each of its
 * minutes (`m<i>`), so a single UpdateItem returns both windows' counts.
 */
async function incr(principal: string, w: Windows): Promise<Counts> {
  // A key's rotation carries its counts over to this item in a transaction; a count that meets it
  // is refused (TransactionConflictException) and taken again, never a 500.
  const out = await retryingConflicts(() =>
    db().send(
      new UpdateCommand({
        TableName: tableName(),
        Key: keys.rateWindow(principal, 'h', w.hourStart),
        UpdateExpression: 'ADD #n :one, #m :one SET #ttl = if_not_exists(#ttl, :ttl)',
        ExpressionAttributeNames: { '#n': 'n', '#m': `m${w.minuteIndex}`, '#ttl': 'ttl' },
        ExpressionAttributeValues: { ':one': 1, ':ttl': windowTtl(w.hourStart) },
        ReturnValues: 'UPDATED_NEW',
      }),
    ),
  );
  const a = out.Attributes ?? {};
  return { ...w, h: Number(a.n ?? 1), m: Number(a[`m${w.minuteIndex}`] ?? 1) };
}

/** When DynamoDB may drop an hour's window item (the TTL only cleans up). */
export const windowTtl = (hourStart: number) => hourStart + 3600 + 60;

/** Decide on counts already taken (the windows' counts include this request). */
export function decide(c: Counts, l: Limits): RateDecision {
  const m0 = c.t - (c.t % 60);
  const minuteLeft = l.perMinute - c.m;
  const hourLeft = l.perHour - c.h;
  // The binding window is the one with fewer requests left (ties: the one resetting later).
  const minuteBinds = minuteLeft < hourLeft;
  const limit = minuteBinds ? l.perMinute : l.perHour;
  const reset = minuteBinds ? m0 + 60 : c.hourStart + 3600;
  const remaining = Math.max(0, Math.min(minuteLeft, hourLeft));
  const allowed = c.m <= l.perMinute && c.h <= l.perHour;
  let retryAfter = 0;
  if (!allowed) {
    const untilMinute = c.m > l.perMinute ? m0 + 60 - c.t : 0;
    const untilHour = c.h > l.perHour ? c.hourStart + 3600 - c.t : 0;
    retryAfter = Math.max(1, untilMinute, untilHour);
  }
  return { allowed, limit, remaining, reset, retryAfter };
}

/** Count one request on the principal's window item and decide. `limits` may resolve in parallel. */
export async function consume(principal: string, limits: Limits | Promise<Limits>): Promise<RateDecision> {
  const [c, l] = await Promise.all([incr(principal, windowsAt()), limits]);
  const decision = decide(c, l);
  if (!decision.allowed) await uncount({ principal }, c);
  return decision;
}

/**
 * Takes a refused request's count back: from the principal's window item, or from the secret item
 * that counted it (shared/auth/authenticate.ts), in the hour it was counted in only.
 */
export async function uncount(on: { principal: string } | { secretHash: string }, c: Windows): Promise<void> {
  const minus = { ':minus': -1 };
  const command =
    'principal' in on
      ? new UpdateCommand({
          TableName: tableName(),
          Key: keys.rateWindow(on.principal, 'h', c.hourStart),
          UpdateExpression: 'ADD #n :minus, #m :minus',
          ConditionExpression: 'attribute_exists(#n)',
          ExpressionAttributeNames: { '#n': 'n', '#m': `m${c.minuteIndex}` },
          ExpressionAttributeValues: minus,
        })
      : new UpdateCommand({
          TableName: tableName(),
          Key: keys.secret(on.secretHash),
          UpdateExpression: 'ADD #n :minus, #m :minus',
          ConditionExpression: '#h = :h',
          ExpressionAttributeNames: { '#h': SECRET_COUNTER.hour, '#n': SECRET_COUNTER.total, '#m': SECRET_COUNTER.minute(c.minuteIndex) },
          ExpressionAttributeValues: { ...minus, ':h': c.hourStart },
        });
  await db()
    .send(command)
    .catch((err: Error) => logger.warn('rate limit: a refused request could not be taken back from its window (counted one too many)', { error: err }));
}

/**
 * Add counts taken elsewhere (a secret item's, when a rotation moves a key onto its own window
 * item) to the principal's window item of that hour.
 */
export function carryOverUpdate(principal: string, hourStart: number, total: number, minutes: Record<number, number>) {
  const names: Record<string, string> = { '#n': 'n', '#ttl': 'ttl' };
  const values: Record<string, unknown> = { ':n': total, ':ttl': windowTtl(hourStart) };
  const adds = ['#n :n'];
  for (const [i, v] of Object.entries(minutes)) {
    names[`#m${i}`] = `m${i}`;
    values[`:m${i}`] = v;
    adds.push(`#m${i} :m${i}`);
  }
  return { key: keys.rateWindow(principal, 'h', hourStart), expression: `ADD ${adds.join(', ')} SET #ttl = if_not_exists(#ttl, :ttl)`, names, values };
}
