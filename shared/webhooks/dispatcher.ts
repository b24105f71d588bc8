/**
 * The webhook dispatcher (D37, D38, D48), the consumer of the `webhooks` queue.
 *
 * Two kinds of message arrive:
 * - a DynamoDB stream record of a new event item (pipe `outbox-to-webhooks`): fan out to every
 *   enabled endpoint of the tenant subscribed to the type, creating one delivery per endpoint on
 *   the event item (`deliveries.<we_id>`), and make the first attempt at once;
 * - an `AttemptMessage` (a retry, a replay, or a re-deferral of a long delay).
 *
 * At least once: a message is acknowledged only when each of its deliveries is delivered, failed,
 * or has its next attempt message already in the queue. Before an attempt's outcome is recorded,
 * the next attempt's message (with a fresh token) is sent; the record is conditional on the
 * attempt count, so of two racing copies only one chain survives (a copy whose token is not the
 * delivery's `next_token` drops). A crash anywhere leaves the message unacknowledged; SQS
 * redelivers it (and after maxReceiveCount parks it in the DLQ), and the receiver may see the
 * event again, always with the same `webhook-id` / event id.
 */
import { randomUUID } from 'node:crypto';
import { GetCommand, UpdateCommand } from '@aws-sdk/lib-dynamodb';
import { unmarshall } from '@aws-sdk/util-dynamodb';
import type { AttributeValue } from '@aws-sdk/client-dynamodb';
import type { SQSBatchResponse, SQSEvent, SQSRecord } from 'aws-lambda';
import { db, tableName } from '../db/client';
import { keys } from '../db/keys';
import { Tx } from '../db/tx';
import { now, addMs } from '../clock';
import { audit } from '../audit';
import { logger } from '../logger';
import { EVENT_RETENTION_MS } from '../outbox';
import { systemContext } from '../context';
import { allEndpoints, signingSecrets, subscribes } from './endpoints';
import { signedHeaders } from './signing';
import { postWebhook, type AttemptResult } from './sender';
import { FAILING_DISABLE_MS, parseRetryAfter, retryDelayMs } from './schedule';
import { DUE_MARGIN_MS, sendAttempt, type AttemptMessage } from './queue';
import { webhookConfig } from './config';
import type { Env } from '../types';

type Item = Record<string, unknown>;
export type DeliveryStatus = 'pending' | 'delivered' | 'failed';

export interface DeliveryEntry {
  status: DeliveryStatus;
  attempts: number;
  last_status_code: number | null;
  last_attempt_at: string | null;
  next_attempt_at: string | null;
  last_error: string | null;
  next_token: string | null;
}

/** How long a message whose delivery state is not visible yet keeps waiting for it (wall clock). */
const NOT_YET_VISIBLE_MS = 20_000;

/** Test seam: an error thrown here escapes the batch like a crashed Lambda (nothing acknowledged). */
export const dispatchHooks: { afterSend?: (eventId: string, endpointId: string) => void | Promise<void> } = {};
export class SimulatedCrash extends Error {
  override name = 'SimulatedCrash';
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
});

// ---------------------------------------------------------------- storage helpers

export async function getEvent(eventId: string): Promise<Item | undefined> {
  const out = await db().send(new GetCommand({ TableName: tableName(), Key: keys.event(eventId), ConsistentRead: true }));
  return out.Item;
}

async function getEndpoint(orgId: string, env: Env, endpointId: string): Promise<Item | undefined> {
  const out = await db().send(
    new GetCommand({ TableName: tableName(), Key: keys.webhookEndpoint(orgId, env, endpointId), ConsistentRead: true }),
  );
  return out.Item;
}

const isConditionFailure = (e: unknown) => (e as Error).name === 'ConditionalCheckFailedException';

/**
 * Keeps `delivery_status` equal to the aggregate of the deliveries: each delivery write bumps `dv`;
 * the aggregate computed from version `dv` is written only if no later version was written.
 */
async function writeAggregate(item: Item): Promise<void> {
  const dv = Number(item.dv ?? 0);
  try {
    await db().send(
      new UpdateCommand({
        TableName: tableName(),
        Key: keys.event(item.id as string),
        UpdateExpression: 'SET delivery_status = :s, ds_version = :dv',
        ConditionExpression: 'attribute_exists(PK) AND (attribute_not_exists(ds_version) OR ds_version < :dv)',
        ExpressionAttributeValues: { ':s': aggregateStatus(item.deliveries as Record<string, DeliveryEntry>), ':dv': dv },
      }),
    );
  } catch (e) {
    if (!isConditionFailure(e)) throw e;
  }
}

/** Creates the delivery entries of `endpointIds` that do not exist yet. */
async function ensureEntries(eventId: string, endpointIds: string[], at: Date): Promise<void> {
  try {
    await db().send(
      new UpdateCommand({
        TableName: tableName(),
        Key: keys.event(eventId),
        UpdateExpression: 'SET deliveries = if_not_exists(deliveries, :empty)',
        ConditionExpression: 'attribute_exists(PK)',
        ExpressionAttributeValues: { ':empty': {} },
      }),
    );
  } catch (e) {
    if (isConditionFailure(e)) return; // the event expired (TTL) or never existed
    throw e;
  }
  const names: Record<string, string> = {};
  const values: Record<string, unknown> = { ':one': 1 };
  const sets = endpointIds.map((id, i) => {
    names[`#w${i}`] = id;
    values[`:e${i}`] = newEntry(at);
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

/** Appends one attempt to the delivery's attempt log (D38: each attempt recorded). */
async function logAttempt(ev: Item, endpointId: string, entry: Record<string, unknown>): Promise<void> {
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

/** D37: 410, or five days of only failures, disables the endpoint (system actor, audited). */
async function disableEndpoint(ep: Item, reason: 'gone' | 'failing_for_5_days'): Promise<void> {
  const tx = new Tx();
  const at = now().toISOString();
  tx.update(
    'webhook_endpoint',
    keys.webhookEndpoint(ep.org_id as string, ep.environment as Env, ep.id as string),
    'SET #st = :d, disabled_reason = :r, updated_at = :u',
    { condition: 'attribute_exists(PK) AND #st = :e', names: { '#st': 'status' }, values: { ':d': 'disabled', ':r': reason, ':u': at, ':e': 'enabled' } },
  );
  audit(tx, {
    orgId: ep.org_id as string,
    eventType: 'webhook_endpoint.disabled',
    actor: systemContext('webhook-dispatcher').actor,
    env: ep.environment as Env,
    resource: { type: 'webhook_endpoint', id: ep.id as string },
    requestId: null,
    data: { reason },
  });
  try {
    await tx.commit();
  } catch (e) {
    if ((e as Error).name !== 'ConditionFailed') throw e;
  }
}

/** Tracks "only failures since" on the endpoint; returns true when the 5-day rule now applies. */
async function trackHealth(ep: Item, ok: boolean, at: Date): Promise<boolean> {
  const key = keys.webhookEndpoint(ep.org_id as string, ep.environment as Env, ep.id as string);
  try {
    if (ok && ep.failing_since) {
      await db().send(new UpdateCommand({ TableName: tableName(), Key: key, UpdateExpression: 'SET failing_since = :n', ConditionExpression: 'attribute_exists(PK)', ExpressionAttributeValues: { ':n': null } }));
    } else if (!ok && !ep.failing_since) {
      await db().send(
        new UpdateCommand({
          TableName: tableName(),
          Key: key,
          UpdateExpression: 'SET failing_since = :t',
          ConditionExpression: 'attribute_exists(PK) AND (attribute_not_exists(failing_since) OR failing_since = :n)',
          ExpressionAttributeValues: { ':t': at.toISOString(), ':n': null },
        }),
      );
    }
  } catch (e) {
    if (!isConditionFailure(e)) throw e;
  }
  return !ok && !!ep.failing_since && at.getTime() - Date.parse(ep.failing_since as string) >= FAILING_DISABLE_MS;
}

// ---------------------------------------------------------------- one attempt

interface AttemptPlan {
  expect: number;
  /** The delivery's `next_token` this attempt runs under (null for a first attempt). */
  token: string | null;
  retryIndex: number;
  replay: boolean;
}

/**
 * Sends `ev` to `ep` once and records the outcome on the delivery entry (conditional on the
 * attempt count `plan.expect`); schedules the next attempt first when one is due.
 */
export async function attemptDelivery(ev: Item, endpointId: string, ep: Item | undefined, plan: AttemptPlan): Promise<void> {
  const at = now();
  const eventId = ev.id as string;
  let result: AttemptResult | null = null;
  let status: DeliveryStatus;
  let nextAt: Date | null = null;
  let error: string | null = null;

  if (!ep || ep.status !== 'enabled') {
    status = 'failed';
    error = ep ? 'endpoint_disabled' : 'endpoint_deleted';
  } else {
    const body = JSON.stringify(ev.envelope);
    const { current, previous } = await signingSecrets(ep, at);
    const headers = signedHeaders(eventId, body, current, previous, at);
    result = await postWebhook(ep.url as string, body, headers, { allowLoopback: webhookConfig().allowLoopback });
    await dispatchHooks.afterSend?.(eventId, endpointId);
    error = result.error;
    if (result.ok) status = 'delivered';
    else if (result.statusCode === 410) status = 'failed';
    else {
      const retryAfterMs =
        result.statusCode === 429 || result.statusCode === 503 ? parseRetryAfter(result.retryAfter, at) : null;
      const delay = plan.replay ? null : retryDelayMs(plan.retryIndex, { scale: webhookConfig().retryScale, retryAfterMs });
      if (delay === null) status = 'failed';
      else {
        status = 'pending';
        nextAt = addMs(at, delay);
      }
    }
  }

  const disableFor5Days = ep && ep.status === 'enabled' && result ? await trackHealth(ep, result.ok, at) : false;
  if (disableFor5Days && status === 'pending') {
    status = 'failed';
    nextAt = null;
  }

  // Next attempt first: if we crash after this, the stale copy drops itself (token mismatch).
  let token: string | null = null;
  if (status === 'pending' && nextAt) {
    token = randomUUID();
    await sendAttempt({
      kind: 'webhook.attempt',
      event_id: eventId,
      endpoint_id: endpointId,
      org_id: ev.org_id as string,
      environment: ev.environment as Env,
      token,
      expect_attempts: plan.expect + 1,
      retry_index: plan.retryIndex + 1,
      replay: false,
      due_at: nextAt.toISOString(),
      created_ms: Date.now(),
    });
  }

  const counted = result !== null; // a skipped attempt (endpoint gone/disabled) is not an attempt
  const entry: DeliveryEntry = {
    status,
    attempts: plan.expect + (counted ? 1 : 0),
    last_status_code: result?.statusCode ?? null,
    last_attempt_at: counted ? at.toISOString() : null,
    next_attempt_at: nextAt ? nextAt.toISOString() : null,
    last_error: error,
    next_token: token,
  };
  let updated: Item | undefined;
  try {
    const out = await db().send(
      new UpdateCommand({
        TableName: tableName(),
        Key: keys.event(eventId),
        UpdateExpression:
          'SET deliveries.#w.#st = :st, deliveries.#w.attempts = :n, deliveries.#w.last_status_code = :c, ' +
          'deliveries.#w.next_attempt_at = :na, deliveries.#w.last_error = :err, deliveries.#w.next_token = :tok' +
          (counted ? ', deliveries.#w.last_attempt_at = :la' : '') +
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
          ':expect': plan.expect,
          ':prevtok': plan.token,
          ':one': 1,
          ...(counted ? { ':la': entry.last_attempt_at } : {}),
        },
        ReturnValues: 'ALL_NEW',
      }),
    );
    updated = out.Attributes;
  } catch (e) {
    if (!isConditionFailure(e)) throw e;
    logger.info('webhook attempt superseded by another copy', { eventId, endpointId });
    return;
  }
  if (updated) await writeAggregate(updated);
  if (counted) {
    await logAttempt(ev, endpointId, {
      attempt: entry.attempts,
      at: entry.last_attempt_at,
      replay: plan.replay,
      status_code: entry.last_status_code,
      error: entry.last_error,
      duration_ms: result!.durationMs,
      outcome: status,
    });
  }
  if (ep && result?.statusCode === 410) await disableEndpoint(ep, 'gone');
  else if (ep && disableFor5Days) await disableEndpoint(ep, 'failing_for_5_days');
}

// ---------------------------------------------------------------- messages

interface StreamRecordBody {
  eventName?: string;
  dynamodb?: { NewImage?: Record<string, AttributeValue> };
}

/** A new event from the outbox: create its deliveries and make each first attempt. */
async function fanOut(image: Item): Promise<void> {
  const eventId = image.id as string;
  const orgId = image.org_id as string;
  const env = image.environment as Env;
  const type = image.type as string;
  const targets = (await allEndpoints(orgId, env)).filter((e) => e.status === 'enabled' && subscribes(e, type));
  const at = now();
  if (!targets.length) {
    // Nothing subscribed: nothing outstanding (documented in docs/webhooks.md).
    try {
      await db().send(
        new UpdateCommand({
          TableName: tableName(),
          Key: keys.event(eventId),
          UpdateExpression: 'SET delivery_status = :d',
          ConditionExpression: 'attribute_exists(PK) AND attribute_not_exists(deliveries) AND delivery_status = :p',
          ExpressionAttributeValues: { ':d': 'delivered', ':p': 'pending' },
        }),
      );
    } catch (e) {
      if (!isConditionFailure(e)) throw e;
    }
    return;
  }
  await ensureEntries(eventId, targets.map((t) => t.id as string), at);
  const ev = await getEvent(eventId);
  if (!ev) return;
  const deliveries = (ev.deliveries ?? {}) as Record<string, DeliveryEntry>;
  await runAll(
    targets.map(async (ep) => {
      const d = deliveries[ep.id as string];
      // Only never-attempted deliveries: a redelivered record must not start a second chain.
      if (!d || d.status !== 'pending' || d.attempts !== 0 || d.next_token) return;
      await attemptDelivery(ev, ep.id as string, ep, { expect: 0, token: null, retryIndex: 0, replay: false });
    }),
  );
}

async function onAttemptMessage(msg: AttemptMessage): Promise<void> {
  const remaining = Date.parse(msg.due_at) - now().getTime();
  if (remaining > DUE_MARGIN_MS) return sendAttempt(msg); // not due yet: wait again (≤ 900 s per hop)
  const ev = await getEvent(msg.event_id);
  if (!ev) return; // expired (30 days) or never committed
  const d = ((ev.deliveries ?? {}) as Record<string, DeliveryEntry>)[msg.endpoint_id];
  if (d && d.status === 'pending' && d.next_token === msg.token && d.attempts === msg.expect_attempts) {
    const ep = await getEndpoint(msg.org_id, msg.environment, msg.endpoint_id);
    return attemptDelivery(ev, msg.endpoint_id, ep, { expect: d.attempts, token: msg.token, retryIndex: msg.retry_index, replay: msg.replay });
  }
  const notVisibleYet = !d || d.attempts < msg.expect_attempts || (d.attempts === msg.expect_attempts && d.next_token !== msg.token);
  if (notVisibleYet && Date.now() - msg.created_ms < NOT_YET_VISIBLE_MS) return sendAttempt(msg, 1);
  // Superseded (another copy ran, a replay took over, or the write that made it live never committed).
}

/** Settles all, then rethrows a simulated crash or the first failure. */
async function runAll(work: Promise<unknown>[]): Promise<void> {
  const results = await Promise.allSettled(work);
  const crash = results.find((r) => r.status === 'rejected' && r.reason instanceof SimulatedCrash);
  if (crash) throw (crash as PromiseRejectedResult).reason;
  const failed = results.find((r) => r.status === 'rejected');
  if (failed) throw (failed as PromiseRejectedResult).reason;
}

async function onRecord(record: SQSRecord): Promise<void> {
  const body = JSON.parse(record.body) as Partial<AttemptMessage> & StreamRecordBody;
  if (body.kind === 'webhook.attempt') return onAttemptMessage(body as AttemptMessage);
  const image = body.dynamodb?.NewImage;
  if (body.eventName === 'INSERT' && image) {
    const item = unmarshall(image);
    if (item.entity === 'event') return fanOut(item);
  }
  logger.warn('webhooks: ignoring an unrecognised message', { messageId: record.messageId });
}

/** SQS batch handler: partial failures are reported per message (redelivered, then the DLQ). */
export async function dispatchBatch(event: SQSEvent): Promise<SQSBatchResponse> {
  const failures: SQSBatchResponse['batchItemFailures'] = [];
  const results = await Promise.allSettled(event.Records.map((r) => onRecord(r)));
  results.forEach((r, i) => {
    if (r.status === 'fulfilled') return;
    if (r.reason instanceof SimulatedCrash) return;
    logger.error('webhooks: message failed; it will be redelivered', { messageId: event.Records[i]!.messageId, error: r.reason as Error });
    failures.push({ itemIdentifier: event.Records[i]!.messageId });
  });
  const crash = results.find((r) => r.status === 'rejected' && r.reason instanceof SimulatedCrash);
  if (crash) throw (crash as PromiseRejectedResult).reason;
  return { batchItemFailures: failures };
}
