/**
 * Authentication (D5, D9): the secret's SHA-256 names its lookup item. A revoked key's secret items
 * are deleted in the revoke transaction, so a revoke takes effect at once (D6); a rotated-out
 * secret carries `not_after` and stops working 24 h after the rotation. Nothing about keys is cached.
 *
 * On rate-limited routes the lookup is the request's count as well (D13, issue 15): one strongly
 * consistent conditional UpdateItem on the secret item adds the request to the hour and minute the
 * item counts and returns the item, so authenticating and counting are one call. An unknown or
 * revoked secret fails the condition and creates nothing.
 */
import { GetCommand, UpdateCommand } from '@aws-sdk/lib-dynamodb';
import { ConditionalCheckFailedException, TransactionConflictException } from '@aws-sdk/client-dynamodb';
import { unmarshall } from '@aws-sdk/util-dynamodb';
import { db, tableName } from '../db/client';
import { keys } from '../db/keys';
import { contentionBackoff, mayRetryContention } from '../db/conflicts';
import { Contention, errors } from '../errors';
import { now } from '../clock';
import { SECRET_COUNTER as C, windowsAt, type Counts, type Windows } from '../ratelimit';
import { secretShape, sha256hex } from './secrets';
import type { BuyerPrincipal, Env, WorkerPrincipal } from '../types';

/** The secret lookup item (written by the api-keys and worker modules). */
export interface SecretItem {
  principal: 'api_key' | 'worker';
  org_id?: string;
  key_id?: string;
  environment?: Env;
  scopes?: string[];
  worker_id?: string;
  /** Set on a rotated-out secret (D6). */
  not_after?: string;
  /**
   * Set on the secret a rotation issues: until this Unix second (the end of the hour in which the
   * overlap ends) the key's two secrets share the key's own window item (shared/ratelimit).
   */
  shared_count_until?: number;
}

export interface Authenticated {
  principal: BuyerPrincipal | WorkerPrincipal;
  /** This request's counts on the secret item; null when the route counts nothing. */
  counts: Counts | null;
  /** The key has two live secrets: its limit is decided on the key's window item instead (D6, D13). */
  sharedCount: boolean;
  /** The secret item that holds `counts` (its hash), for taking back a refused request. */
  countedOn: string | null;
}

type Item = SecretItem & Record<string, unknown>;

const MAX_ATTEMPTS = 6;

/**
 * Count the request on the secret item and return the item, or undefined for an unknown secret.
 * The usual call adds one to the hour the item counts; the first request of an hour starts it
 * afresh (and drops the last hour's minutes). A write racing a rotation, a revoke or another
 * hour's reset is retried; the revoke's deletion then answers "unknown".
 */
async function countOnSecret(hash: string): Promise<{ item: Item; counts: Counts } | undefined> {
  let w: Windows = windowsAt();
  let fresh = false; // the item holds an older hour (or none): start this one
  let old: Item | undefined;
  let conflicts = 0;
  const since = Date.now();
  for (let attempt = 0; attempt < MAX_ATTEMPTS; attempt++) {
    const minute = C.minute(w.minuteIndex);
    const stale = fresh ? Object.keys(old ?? {}).filter((n) => C.isMinute(n) && n !== minute) : [];
    const names: Record<string, string> = { '#h': C.hour, '#n': C.total, '#m': minute };
    stale.forEach((n, i) => (names[`#r${i}`] = n));
    try {
      const out = await db().send(
        new UpdateCommand({
          TableName: tableName(),
          Key: keys.secret(hash),
          ...(fresh
            ? {
                UpdateExpression: `SET #h = :h, #n = :one, #m = :one${stale.length ? ` REMOVE ${stale.map((_, i) => `#r${i}`).join(', ')}` : ''}`,
                ConditionExpression: 'attribute_exists(PK) AND (attribute_not_exists(#h) OR #h < :h)',
                ExpressionAttributeValues: { ':h': w.hourStart, ':one': 1 },
              }
            : {
                // `#h = :h` holds only on an existing item: an unknown secret creates nothing.
                UpdateExpression: 'SET #n = #n + :one, #m = if_not_exists(#m, :zero) + :one',
                ConditionExpression: '#h = :h',
                ExpressionAttributeValues: { ':h': w.hourStart, ':one': 1, ':zero': 0 },
              }),
          ExpressionAttributeNames: names,
          ReturnValues: 'ALL_NEW',
          ReturnValuesOnConditionCheckFailure: 'ALL_OLD',
        }),
      );
      const item = out.Attributes as Item;
      return { item, counts: { ...w, h: Number(item[C.total]), m: Number(item[minute]) } };
    } catch (e) {
      if (e instanceof TransactionConflictException) {
        // A rotation, revoke or last-use transaction holds the item for a moment: waited out with
        // a commit's bounded backoff (a few seconds at most), without using up the attempts below.
        if (!mayRetryContention(++conflicts, since)) throw new Contention(conflicts);
        await contentionBackoff(conflicts - 1);
        attempt--;
        continue;
      }
      if (!(e instanceof ConditionalCheckFailedException)) throw e;
      if (!e.Item) return undefined; // no such secret (never issued, or revoked)
      old = unmarshall(e.Item) as Item;
      const hour = Number(old[C.hour] ?? 0);
      fresh = hour < w.hourStart;
      // Another process's clock already started a later hour: count in that hour.
      if (hour > w.hourStart) w = windowsAt(hour * 1000);
    }
  }
  throw new Contention(MAX_ATTEMPTS);
}

function principalOf(item: Item, expected: 'api_key' | 'worker', hash: string): BuyerPrincipal | WorkerPrincipal {
  if (item.principal !== expected) {
    throw errors.authentication(expected === 'worker' ? 'Invalid worker token.' : 'Invalid API key.');
  }
  if (item.not_after && new Date(item.not_after).getTime() <= now().getTime()) {
    throw errors.authentication('This API key secret was rotated and its 24-hour overlap has ended.');
  }
  if (item.principal === 'worker') return { kind: 'worker', workerId: item.worker_id!, env: item.environment ?? 'live' };
  return {
    kind: 'api_key',
    orgId: item.org_id!,
    keyId: item.key_id!,
    env: item.environment!,
    scopes: item.scopes ?? [],
    previousSecret: !!item.not_after,
    secretHash: hash,
  };
}

/**
 * D6 for a request that was held (a long poll): the key's secret must still exist and be within
 * its rotation overlap when the answer goes out, else 401 as for a new request.
 */
export async function stillAuthenticated(p: BuyerPrincipal): Promise<void> {
  if (!p.secretHash) return; // not authenticated by a secret (an internal caller)
  const out = await db().send(new GetCommand({ TableName: tableName(), Key: keys.secret(p.secretHash), ConsistentRead: true }));
  const item = out.Item as Item | undefined;
  if (!item) throw errors.authentication('This API key was revoked while the request waited.');
  principalOf(item, 'api_key', p.secretHash); // a rotated-out secret past its overlap: 401
}

/**
 * The SHA-256 of the API key an `Authorization` header presents, when it is well formed (nothing
 * is read: whether the key exists is for `authenticate` to decide).
 */
export function presentedKeyHash(authorization: string | undefined): string | undefined {
  const m = authorization ? /^Bearer\s+(\S+)\s*$/i.exec(authorization) : null;
  return m && secretShape(m[1]!)?.kind === 'api_key' ? sha256hex(m[1]!) : undefined;
}

/**
 * Authenticate the `Authorization` header for a route of the `expected` principal; with `count`,
 * the same call counts the request (see the module comment).
 */
export async function authenticate(
  authorization: string | undefined,
  expected: 'api_key' | 'worker',
  opts: { count?: boolean } = {},
): Promise<Authenticated> {
  if (!authorization) throw errors.authentication();
  const m = /^Bearer\s+(\S+)\s*$/i.exec(authorization);
  if (!m) throw errors.authentication('The Authorization header must be "Bearer <key>".');
  const secret = m[1]!;
  const shape = secretShape(secret);
  // D9: buyer keys are refused on worker routes and worker tokens on buyer routes.
  if (!shape || shape.kind !== expected) {
    throw errors.authentication(
      expected === 'worker' ? 'A valid worker token is required.' : 'Invalid API key.',
    );
  }
  const hash = sha256hex(secret);
  let item: Item | undefined;
  let counts: Counts | null = null;
  if (opts.count) {
    const r = await countOnSecret(hash);
    item = r?.item;
    counts = r?.counts ?? null;
  } else {
    const out = await db().send(new GetCommand({ TableName: tableName(), Key: keys.secret(hash), ConsistentRead: true }));
    item = out.Item as Item | undefined;
  }
  if (!item) throw errors.authentication(expected === 'worker' ? 'Invalid worker token.' : 'Invalid API key.');
  const principal = principalOf(item, expected, hash);
  const sharedCount = !!item.not_after || (typeof item.shared_count_until === 'number' && counts !== null && counts.t < item.shared_count_until);
  return { principal, counts, sharedCount, countedOn: counts ? hash : null };
}
