/**
 * Held long polls are counted (D20): at most `longPollMaxWaits` per long-poll route at once, all
 * organizations together, and `longPollMaxWaitsPerOrg` per organization. So one caller cannot hold
 * every wait, waits cannot take the account's Lambda concurrency, and a plain GET of the same route
 * is never held back by them (the route's function has no concurrency cap of its own).
 *
 * A slot is a lease: attribute `w<i>` of the route's (or the organization's) item holds when the
 * lease ends (the wait's end plus a margin), taken with a conditional UpdateItem and removed when
 * the wait answers. A function that stops mid-wait leaves its lease, which lapses at its end, so
 * nothing is held for ever. Times are the wall clock (every process shares it).
 */
import { ConditionalCheckFailedException } from '@aws-sdk/client-dynamodb';
import { unmarshall } from '@aws-sdk/util-dynamodb';
import { UpdateCommand } from '@aws-sdk/lib-dynamodb';
import { config } from './config';
import { batchGetConsistent, keyId } from './db/batch-get';
import { db, tableName } from './db/client';
import { keys, type Key } from './db/keys';
import { ApiError } from './errors';
import { WAIT_SLOTS_MAX } from './manifest/access';

/** A lease ends this long after its wait would: the handler answers and releases well before. */
const LEASE_MARGIN_MS = 10_000;
/** Conditional writes tried on slots seen free before the wait is refused. */
const CLAIM_ATTEMPTS = 3;

export interface WaitSlot {
  release(): Promise<void>;
}

type Slots = Record<string, unknown> | undefined;
type Claim = { slot: number } | { slot: null; freesInMs: number };

/**
 * A slot for a wait of `seconds` on `route` for `orgId`, or the refusal: 429 `rate_limit_exceeded`
 * with Retry-After (when the first of those waits ends at the latest), code `long_polls_per_org`
 * when the organization holds its share, `long_polls_full` when the route holds all it may (a
 * limit of the service, in the spec's error type for limits).
 */
export async function takeWaitSlot(route: string, orgId: string, seconds: number): Promise<WaitSlot> {
  const { longPollMaxWaits, longPollMaxWaitsPerOrg } = config();
  const until = Date.now() + seconds * 1000 + LEASE_MARGIN_MS;
  const orgKey = keys.waitSlots(route, orgId);
  const routeKey = keys.waitSlots(route);
  const items = await batchGetConsistent([orgKey, routeKey]);
  const own = await claim(orgKey, items.get(keyId(orgKey)), Math.min(longPollMaxWaitsPerOrg, WAIT_SLOTS_MAX), until);
  if (own.slot === null) {
    const after = retryAfterSeconds(own.freesInMs);
    throw refusal(after, 'long_polls_per_org', `This organization already holds ${longPollMaxWaitsPerOrg} long polls of this route at once; retry after ${after} seconds, or read without Prefer: wait.`);
  }
  let all: Claim;
  try {
    all = await claim(routeKey, items.get(keyId(routeKey)), Math.min(longPollMaxWaits, WAIT_SLOTS_MAX), until);
  } catch (e) {
    await free(orgKey, own.slot, until).catch(() => undefined); // else it lapses at its end
    throw e;
  }
  if (all.slot === null) {
    await free(orgKey, own.slot, until);
    const after = retryAfterSeconds(all.freesInMs);
    throw refusal(after, 'long_polls_full', `The service holds as many long polls of this route as it can right now; retry after ${after} seconds, or read without Prefer: wait.`);
  }
  const routeSlot = all.slot;
  let released = false;
  return {
    release: async () => {
      if (released) return;
      released = true;
      await Promise.all([free(orgKey, own.slot, until), free(routeKey, routeSlot, until)]);
    },
  };
}

function refusal(after: number, code: string, message: string): ApiError {
  return new ApiError(429, 'rate_limit_exceeded', message, [{ message, code }], undefined, { 'Retry-After': String(after) });
}

/** Seconds until a held wait ends at the latest (its lease's end less the margin), at least 1. */
function retryAfterSeconds(freesInMs: number): number {
  return Math.max(1, Math.ceil((freesInMs - LEASE_MARGIN_MS) / 1000));
}

/** Takes a slot free in `item` (absent, or its lease ended), trying again on a race. */
async function claim(key: Key, item: Slots, cap: number, until: number): Promise<Claim> {
  let current = item;
  for (let attempt = 0; attempt < CLAIM_ATTEMPTS; attempt++) {
    const at = Date.now();
    const ends = Array.from({ length: cap }, (_, i) => Number(current?.[`w${i}`] ?? 0));
    const open = ends.flatMap((end, i) => (end > at ? [] : [i]));
    if (open.length === 0) return { slot: null, freesInMs: Math.min(...ends) - at };
    const slot = open[Math.floor(Math.random() * open.length)]!;
    try {
      await db().send(
        new UpdateCommand({
          TableName: tableName(),
          Key: key,
          UpdateExpression: 'SET #w = :until',
          ConditionExpression: 'attribute_not_exists(#w) OR #w <= :at',
          ExpressionAttributeNames: { '#w': `w${slot}` },
          ExpressionAttributeValues: { ':until': until, ':at': at },
          ReturnValuesOnConditionCheckFailure: 'ALL_OLD',
        }),
      );
      return { slot };
    } catch (e) {
      if (!(e instanceof ConditionalCheckFailedException)) throw e;
      // Another wait took it first: look again at the item as that write left it.
      current = e.Item ? (unmarshall(e.Item) as Record<string, unknown>) : { ...current, [`w${slot}`]: Number.MAX_SAFE_INTEGER };
    }
  }
  return { slot: null, freesInMs: 1000 + LEASE_MARGIN_MS };
}

/** Ends this wait's lease (unless it lapsed and another wait took the slot since). */
async function free(key: Key, slot: number, until: number): Promise<void> {
  try {
    await db().send(
      new UpdateCommand({
        TableName: tableName(),
        Key: key,
        UpdateExpression: 'REMOVE #w',
        ConditionExpression: '#w = :until',
        ExpressionAttributeNames: { '#w': `w${slot}` },
        ExpressionAttributeValues: { ':until': until },
      }),
    );
  } catch (e) {
    if (!(e instanceof ConditionalCheckFailedException)) throw e;
  }
}

