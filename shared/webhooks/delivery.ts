/**
 * Delivering one event to its endpoints (D37, D48): the fan-out of a new event and each attempt.
 *
 * At least once: before an attempt's outcome is recorded, the next attempt's message (with a fresh
 * token) is sent; the record is conditional on the attempt count and token, so of two racing copies
 * only one chain survives (a copy whose token is not the delivery's `next_token` drops). The first
 * attempt is claimed the same way: the fan-out that created a delivery entry put its token there
 * (derived from the stream record's id, so a redelivery or re-send of that record keeps the claim),
 * and a second fan-out of the same event (another record of it, e.g. from the start-up reconciler)
 * does nothing.
 * A crash anywhere leaves the message unacknowledged; SQS redelivers it, and the receiver may see
 * the event again, always with the same `webhook-id` / event id.
 */
import { randomUUID } from 'node:crypto';
import { ROUTE_FUNCTION_TIMEOUT_SECONDS, WEBHOOKS_CONSUMER_TIMEOUT_SECONDS } from '../manifest/timeouts';
import { now, addMs } from '../clock';
import { logger } from '../logger';
import { allEndpoints, signingSecrets, subscribes } from './endpoints';
import { signedHeaders } from './signing';
import { recordWebhookAttempt } from '../observability/metrics';
import { postWebhook, type AttemptResult } from './sender';
import { parseRetryAfter, retryDelayMs } from './schedule';
import { DUE_MARGIN_MS, sendAttempt, type AttemptMessage } from './queue';
import { webhookConfig } from './config';
import { disableEndpoint, trackHealth } from './endpoint-health';
import {
  ensureEntries,
  getEndpoint,
  getEvent,
  logAttempt,
  markNothingToDeliver,
  recordAttempt,
  writeAggregate,
  type DeliveryEntry,
  type DeliveryStatus,
  type Item,
} from './delivery-store';
import type { Env } from '../types';

/** How the dispatcher reaches receivers; tests wrap it (e.g. to die after a send). */
export type Post = typeof postWebhook;

/**
 * How long a message whose delivery state is not visible yet keeps waiting for it (wall clock,
 * from when it was sent). Its writer sends it before committing that state (the replay route after
 * all its sends, the consumer before recording an attempt), and may commit until its function times
 * out: the wait outlasts the longest of them, with a margin, so a late commit never finds its
 * message already dropped (D37: nothing is lost). A message whose state never commits drops after.
 */
export const NOT_YET_VISIBLE_MS = (Math.max(ROUTE_FUNCTION_TIMEOUT_SECONDS, WEBHOOKS_CONSUMER_TIMEOUT_SECONDS) + 10) * 1000;

export interface AttemptPlan {
  expect: number;
  /** The delivery's `next_token` this attempt runs under. */
  token: string | null;
  retryIndex: number;
  replay: boolean;
  /** A replay that took over a delivery still being retried: see AttemptMessage.keep_retries. */
  keepRetries?: boolean;
}

/** The claim token of a fan-out: the same for every delivery of one stream record. */
export const fanOutToken = (recordId: string) => `fanout:${recordId}`;

/**
 * Sends `ev` to `ep` once and records the outcome on the delivery entry (conditional on the
 * attempt count `plan.expect` and token); schedules the next attempt first when one is due.
 */
export async function attemptDelivery(ev: Item, endpointId: string, ep: Item | undefined, plan: AttemptPlan, post: Post = postWebhook): Promise<void> {
  const at = now();
  const eventId = ev.id as string;
  let result: AttemptResult | null = null;
  let status: DeliveryStatus;
  let nextAt: Date | null = null;
  let nextIndex: number | null = null;
  let error: string | null = null;

  if (!ep || ep.status !== 'enabled') {
    status = 'failed';
    error = ep ? 'endpoint_disabled' : 'endpoint_deleted';
  } else if (!subscribes(ep, ev.type as string)) {
    // The buyer took this event type off the endpoint since: it is not sent any more.
    status = 'failed';
    error = 'endpoint_unsubscribed';
  } else {
    const body = JSON.stringify(ev.envelope);
    const { current, previous } = await signingSecrets(ep, at);
    const headers = signedHeaders(eventId, body, current, previous, at);
    result = await post(ep.url as string, body, headers, { allowLoopback: webhookConfig().allowLoopback });
    recordWebhookAttempt(result.ok);
    error = result.error;
    if (result.ok) status = 'delivered';
    else if (result.statusCode === 410) status = 'failed';
    else {
      const retryAfterMs = result.statusCode === 429 || result.statusCode === 503 ? parseRetryAfter(result.retryAfter, at) : null;
      const scale = webhookConfig().retryScale;
      let delay: number | null = null;
      if (!plan.replay) {
        delay = retryDelayMs(plan.retryIndex, { scale, retryAfterMs });
        nextIndex = plan.retryIndex + 1;
      } else if (plan.keepRetries) {
        // A replay takes none of the retries left: the one it took over is planned again, after
        // the wait that comes before it in the schedule, counted from now (D37).
        delay = retryDelayMs(Math.max(0, plan.retryIndex - 1), { scale, retryAfterMs });
        nextIndex = plan.retryIndex;
      }
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
      retry_index: nextIndex!,
      replay: false,
      due_at: nextAt.toISOString(),
      created_ms: Date.now(),
    });
  }

  const counted = result !== null; // a skipped attempt (endpoint gone, disabled or unsubscribed) is not an attempt
  const entry: DeliveryEntry = {
    status,
    attempts: plan.expect + (counted ? 1 : 0),
    last_status_code: result?.statusCode ?? null,
    last_attempt_at: counted ? at.toISOString() : null,
    next_attempt_at: nextAt ? nextAt.toISOString() : null,
    last_error: error,
    next_token: token,
    retry_index: token ? nextIndex : null,
  };
  const updated = await recordAttempt(eventId, endpointId, entry, { expect: plan.expect, prevToken: plan.token, counted });
  if (!updated) {
    logger.info('webhook attempt superseded by another copy', { eventId, endpointId });
    return;
  }
  await writeAggregate(updated);
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

/**
 * A new event from the outbox: create its deliveries (claimed by `token`) and make each first
 * attempt the claim allows, in parallel (one endpoint's slowness does not hold another's).
 */
export async function fanOut(image: Item, token: string, post: Post = postWebhook): Promise<void> {
  const eventId = image.id as string;
  const type = image.type as string;
  const endpoints = await allEndpoints(image.org_id as string, image.environment as Env);
  const targets = endpoints.filter((e) => e.status === 'enabled' && subscribes(e, type));
  if (!targets.length) {
    // Logged with what was found, so an event that reaches no endpoint can be told apart from one
    // whose endpoints were missed.
    logger.info('webhooks: no endpoint subscribed to the event', { eventId, type, org_id: image.org_id, environment: image.environment, endpoints: endpoints.map((e) => ({ id: e.id, status: e.status, events: e.events })) });
    await markNothingToDeliver(eventId); // a no-op once entries exist
  }
  if (targets.length && !(await ensureEntries(eventId, targets.map((t) => t.id as string), now(), token))) return;
  const ev = await getEvent(eventId);
  if (!ev) return;
  const deliveries = (ev.deliveries ?? {}) as Record<string, DeliveryEntry>;
  // Every never-attempted delivery this fan-out claimed, also one whose endpoint was disabled,
  // deleted or unsubscribed since an earlier run of this fan-out created it: that attempt records
  // it failed instead of leaving it pending for ever. A second fan-out starts no second chain.
  // (An entry written before claims existed has no token: the fan-out that finds it attempts it.)
  const claimed = Object.entries(deliveries).filter(([, d]) => d.status === 'pending' && d.attempts === 0 && (d.next_token === token || d.next_token === null));
  await settleAll(
    claimed.map(([endpointId, d]) =>
      attemptDelivery(ev, endpointId, endpoints.find((e) => e.id === endpointId), { expect: 0, token: d.next_token, retryIndex: 0, replay: false }, post),
    ),
  );
}

/** A retry, a replay, a re-deferral of a long delay, or a first attempt re-enqueued on start-up. */
export async function onAttemptMessage(msg: AttemptMessage, post: Post = postWebhook): Promise<void> {
  const remaining = Date.parse(msg.due_at) - now().getTime();
  if (remaining > DUE_MARGIN_MS) return sendAttempt(msg); // not due yet: wait again (≤ 900 s per hop)
  const ev = await getEvent(msg.event_id);
  if (!ev) return; // expired (30 days) or never committed
  const d = ((ev.deliveries ?? {}) as Record<string, DeliveryEntry>)[msg.endpoint_id];
  if (d && d.status === 'pending' && d.next_token === msg.token && d.attempts === msg.expect_attempts) {
    const ep = await getEndpoint(msg.org_id, msg.environment, msg.endpoint_id);
    const plan = { expect: d.attempts, token: msg.token, retryIndex: msg.retry_index, replay: msg.replay, keepRetries: msg.keep_retries === true };
    return attemptDelivery(ev, msg.endpoint_id, ep, plan, post);
  }
  const notVisibleYet = !d || d.attempts < msg.expect_attempts || (d.attempts === msg.expect_attempts && d.next_token !== msg.token);
  if (notVisibleYet && Date.now() - msg.created_ms < NOT_YET_VISIBLE_MS) return sendAttempt(msg, 1);
  // Superseded (another copy ran, a replay took over, or the write that made it live never committed).
  // If this copy's own run wrote its outcome and then failed before the follow-up writes, they are
  // done now: the event's status (idempotent, version-guarded) and a 410's disabling.
  if (d) {
    await writeAggregate(ev);
    if (d.attempts === msg.expect_attempts + 1 && d.last_status_code === 410) {
      const ep = await getEndpoint(msg.org_id, msg.environment, msg.endpoint_id);
      if (ep && ep.status === 'enabled') await disableEndpoint(ep, 'gone');
    }
  }
}

/** Settles all, then rethrows the first failure (so the message is redelivered). */
async function settleAll(work: Promise<unknown>[]): Promise<void> {
  const failed = (await Promise.allSettled(work)).find((r) => r.status === 'rejected');
  if (failed) throw (failed as PromiseRejectedResult).reason;
}
