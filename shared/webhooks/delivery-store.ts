/**
 * What the webhook dispatcher keeps in the table (D37, D38): the delivery entries on the event item
 * (`deliveries.<we_id>`), the event's aggregate `delivery_status`, and each delivery's attempt log.
 * Every write is conditional; `ifCondition` is the one way a lost condition race is absorbed.
 */
import { GetCommand, UpdateCommand } from '@aws-sdk/lib-dynamodb';
import { db, tableName } from '../db/client';
import { keys } from '../db/keys';
import { EVENT_RETENTION_MS } from '../outbox';
import type { Env } from '../types';

export type Item = Record<string, unknown>;
export type DeliveryStatus = 'pending' | 'delivered' | 'failed';

export interface DeliveryEntry {
  status: DeliveryStatus;
  attempts: number;
  last_status_code: number | null;
  last_attempt_at: string | null;
  next_attempt_at: string | null;
  last_error: string | null;
  /** The token of the one message (or fan-out) allowed to make the next attempt. */
  next_token: string | null;
  /**
   * The retry schedule's position of the next attempt (0: the first attempt; n: the n-th retry);
   * null when the next attempt is a replay with no retries after it, or nothing is due. A replay
   * that takes over a delivery still being retried keeps it, so the retries left are not lost.
   * Absent on entries written before it existed (then: the attempt count, as without replays).
   */
  retry_index?: number | null;
  /**
   * The next attempt is a replay (D37: one attempt that takes none of the retries left): what a
   * message re-enqueued from this entry alone (the local runtime's start-up reconciler) must say.
   */
  next_replay?: boolean;
}

/** A failed DynamoDB condition, from a single write or a transaction (shared/db/tx.ts). */
export const isConditionFailure = (e: unknown): boolean => {
  const name = (e as Error | undefined)?.name;
  return name === 'ConditionalCheckFailedException' || name === 'ConditionFailed';
};

/** Runs a conditional write; false when its condition did not hold (another writer won). */
export async function ifCondition(write: Promise<unknown>): Promise<boolean> {
  try {
    await write;
    return true;
  } catch (e) {
    if (isConditionFailure(e)) return false;
    throw e;
  }
}

export function aggregateStatus(deliveries: Record<string, DeliveryEntry> | undefined): DeliveryStatus {
  const all = Object.values(deliveries ?? {});
  if (all.some((d) => d.status === 'pending')) return 'pending';
  if (all.some((d) => d.status === 'failed')) return 'failed';
  return 'delivered';
}

export const newEntry = (at: Date, token: string | null = null): DeliveryEntry => ({
  status: 'pending',
  attempts: 0,
  last_status_code: null,
  last_attempt_at: null,
  next_attempt_at: at.toISOString(),
  last_error: null,
  next_token: token,
  retry_index: 0,
});

export async function getEvent(eventId: string): Promise<Item | undefined> {
  const out = await db().send(new GetCommand({ TableName: tableName(), Key: keys.event(eventId), ConsistentRead: true }));
  return out.Item;
}

export async function getEndpoint(orgId: string, env: Env, endpointId: string): Promise<Item | undefined> {
  const out = await db().send(new GetCommand({ TableName: tableName(), Key: keys.webhookEndpoint(orgId, env, endpointId), ConsistentRead: true }));
  return out.Item;
}

/**
 * Keeps `delivery_status` equal to the aggregate of the deliveries: each delivery write bumps `dv`;
 * the aggregate computed from version `dv` is written only if no later version was written.
 */
export async function writeAggregate(item: Item): Promise<void> {
  await ifCondition(
    db().send(
      new UpdateCommand({
        TableName: tableName(),
        Key: keys.event(item.id as string),
        UpdateExpression: 'SET delivery_status = :s, ds_version = :dv',
        ConditionExpression: 'attribute_exists(PK) AND (attribute_not_exists(ds_version) OR ds_version < :dv)',
        ExpressionAttributeValues: { ':s': aggregateStatus(item.deliveries as Record<string, DeliveryEntry>), ':dv': Number(item.dv ?? 0) },
      }),
    ),
  );
}

/** No endpoint subscribed: nothing outstanding (documented in docs/webhooks.md). */
export async function markNothingToDeliver(eventId: string): Promise<void> {
  await ifCondition(
    db().send(
      new UpdateCommand({
        TableName: tableName(),
        Key: keys.event(eventId),
        UpdateExpression: 'SET delivery_status = :d',
        ConditionExpression: 'attribute_exists(PK) AND attribute_not_exists(deliveries) AND delivery_status = :p',
        ExpressionAttributeValues: { ':d': 'delivered', ':p': 'pending' },
      }),
    ),
  );
}

/**
 * Creates the delivery entries of `endpointIds` that do not exist yet, each claimed by `token`:
 * of two fan-outs of the same event, the first one's token stays, and only it attempts.
 * Returns false when the event no longer exists.
 */
export async function ensureEntries(eventId: string, endpointIds: string[], at: Date, token: string): Promise<boolean> {
  const exists = await ifCondition(
    db().send(
      new UpdateCommand({
        TableName: tableName(),
        Key: keys.event(eventId),
        UpdateExpression: 'SET deliveries = if_not_exists(deliveries, :empty)',
        ConditionExpression: 'attribute_exists(PK)',
        ExpressionAttributeValues: { ':empty': {} },
      }),
    ),
  );
  if (!exists) return false; // the event expired (TTL) or never existed
  // An update expression holds at most 4 KB (and 300 operators): a tenant with many endpoints
  // gets its entries in several writes, each idempotent, so a redelivered fan-out completes them.
  for (let from = 0; from < endpointIds.length; from += ENTRIES_PER_WRITE) {
    const names: Record<string, string> = {};
    const values: Record<string, unknown> = { ':one': 1 };
    const sets = endpointIds.slice(from, from + ENTRIES_PER_WRITE).map((id, i) => {
      names[`#w${i}`] = id;
      values[`:e${i}`] = newEntry(at, token);
      return `deliveries.#w${i} = if_not_exists(deliveries.#w${i}, :e${i})`;
    });
    await db().send(
      new UpdateCommand({
        TableName: tableName(),
        Key: keys.event(eventId),
        UpdateExpression: `SET ${sets.join(', ')} ADD dv :one`,
        ExpressionAttributeNames: names,
        ExpressionAttributeValues: values,
      }),
    );
  }
  return true;
}

/** Delivery entries created per write: about 2.8 KB of update expression, 100 operators. */
export const ENTRIES_PER_WRITE = 50;

/**
 * Records an attempt's outcome on the delivery entry, only if the entry is still at `expect`
 * attempts under `prevToken` (of two racing copies, one chain survives). Returns the new event
 * item, or null when another copy got there first.
 */
export async function recordAttempt(
  eventId: string,
  endpointId: string,
  entry: DeliveryEntry,
  cond: { expect: number; prevToken: string | null; counted: boolean },
): Promise<Item | null> {
  let updated: Item | null = null;
  const won = await ifCondition(
    db()
      .send(
        new UpdateCommand({
          TableName: tableName(),
          Key: keys.event(eventId),
          UpdateExpression:
            'SET deliveries.#w.#st = :st, deliveries.#w.attempts = :n, deliveries.#w.last_status_code = :c, ' +
            'deliveries.#w.next_attempt_at = :na, deliveries.#w.last_error = :err, deliveries.#w.next_token = :tok, ' +
            // The next attempt this record plans is never a replay (only the replay route plans one).
            'deliveries.#w.retry_index = :ri, deliveries.#w.next_replay = :nr' +
            (cond.counted ? ', deliveries.#w.last_attempt_at = :la' : '') +
            ' ADD dv :one',
          ConditionExpression: 'deliveries.#w.attempts = :expect AND deliveries.#w.next_token = :prevtok',
          ExpressionAttributeNames: { '#w': endpointId, '#st': 'status' },
          ExpressionAttributeValues: {
            ':st': entry.status,
            ':n': entry.attempts,
            ':c': entry.last_status_code,
            ':na': entry.next_attempt_at,
            ':err': entry.last_error,
            ':tok': entry.next_token,
            ':ri': entry.retry_index ?? null,
            ':nr': false,
            ':expect': cond.expect,
            ':prevtok': cond.prevToken,
            ':one': 1,
            ...(cond.counted ? { ':la': entry.last_attempt_at } : {}),
          },
          ReturnValues: 'ALL_NEW',
        }),
      )
      .then((out) => {
        updated = out.Attributes ?? null;
      }),
  );
  return won ? updated : null;
}

/** Appends one attempt to the delivery's attempt log (D38: each attempt recorded). */
export async function logAttempt(ev: Item, endpointId: string, entry: Record<string, unknown>): Promise<void> {
  await db().send(
    new UpdateCommand({
      TableName: tableName(),
      Key: keys.delivery(ev.id as string, endpointId),
      UpdateExpression:
        'SET entity = :ent, event_id = :ev, endpoint_id = :we, org_id = :org, environment = :env, attempt_log = list_append(if_not_exists(attempt_log, :empty), :a), #ttl = :ttl',
      ExpressionAttributeNames: { '#ttl': 'ttl' },
      ExpressionAttributeValues: {
        ':ent': 'webhook_delivery',
        ':ev': ev.id,
        ':we': endpointId,
        ':org': ev.org_id,
        ':env': ev.environment,
        ':empty': [],
        ':a': [entry],
        ':ttl': Math.floor((Date.parse(ev.created_at as string) + EVENT_RETENTION_MS) / 1000),
      },
    }),
  );
}
