/**
 * `POST /v1/webhook_events/{id}/replay` (D37, D48): re-delivers the event, with the same event id,
 * to every enabled endpoint subscribed to its type (or the one named by `endpoint_id`). A replay is
 * one fresh attempt per endpoint, signed at send time; it does not restart the retry schedule, and
 * it takes none of the retries a delivery still has: a replay of a delivery still being retried (or
 * not attempted yet, e.g. a replay before the fan-out) keeps its place in the schedule
 * (`retry_index`), and if the replay attempt fails, the retries go on from there (delivery.ts).
 *
 * The attempt messages are sent before the transaction that makes them live (their token on the
 * delivery): if the transaction fails, they find no matching token and drop; if it commits, the
 * dispatcher runs them. So an accepted replay (202) is never lost.
 */
import { randomUUID } from 'node:crypto';
import { keys } from '../db/keys';
import { Tx } from '../db/tx';
import { now } from '../clock';
import { audit } from '../audit';
import { errors } from '../errors';
import { recordResponse, type MutationContext } from '../context';
import { allEndpoints, subscribes } from './endpoints';
import { getEvent, newEntry, type DeliveryEntry } from './delivery-store';
import { presentEvent } from './events';
import { sendAttempt } from './queue';
import type { BuyerPrincipal } from '../types';

type Item = Record<string, unknown>;

export async function replayEvent(ctx: MutationContext, p: BuyerPrincipal, event: Item, endpointId?: string) {
  for (let attempt = 0; ; attempt++) {
    try {
      return await replayOnce(ctx, p, attempt === 0 ? event : ((await getEvent(event.id as string)) ?? event), endpointId);
    } catch (e) {
      // A delivery was written concurrently (dispatcher): read again and retry a few times.
      if ((e as Error).name !== 'ConditionFailed' || attempt >= 3) {
        // A "retry" answer carries Retry-After, so the idempotency key is released for that retry (D11).
        if ((e as Error).name === 'ConditionFailed') throw errors.conflict('The event is being delivered right now; retry the replay.', undefined, { 'Retry-After': '1' });
        throw e;
      }
    }
  }
}

async function replayOnce(ctx: MutationContext, p: BuyerPrincipal, ev: Item, endpointId?: string) {
  const endpoints = await allEndpoints(p.orgId, p.env);
  if (endpointId && !endpoints.some((e) => e.id === endpointId)) {
    // Not one of this organization's endpoints in this environment (or not an endpoint id at all): the field is wrong.
    throw errors.validation(`No webhook endpoint ${endpointId} in this environment.`, [{ field: 'endpoint_id', code: 'unknown_endpoint', message: 'no such webhook endpoint' }]);
  }
  const targets = endpoints.filter((e) => (endpointId ? e.id === endpointId : true) && e.status === 'enabled' && subscribes(e, ev.type as string));
  if (!targets.length) {
    throw endpointId
      ? errors.conflict(`Webhook endpoint ${endpointId} is disabled or is not subscribed to ${String(ev.type)}.`, [
          { field: 'endpoint_id', code: 'endpoint_not_subscribed', message: 'the endpoint is disabled or not subscribed to this event type' },
        ])
      : errors.conflict(`No enabled webhook endpoint is subscribed to ${String(ev.type)}; nothing to replay to.`, [{ code: 'no_subscribed_endpoint', message: 'no enabled endpoint subscribes to this event type' }]);
  }
  const at = now();
  const existing = (ev.deliveries as Record<string, DeliveryEntry> | undefined) ?? null;
  // Not fanned out yet (no delivery and still pending): the fan-out will find the replay's entries
  // claimed and skip them, so those entries carry the whole schedule.
  const beforeFanOut = (!existing || Object.keys(existing).length === 0) && ev.delivery_status === 'pending';
  const retryIndexes = new Map<string, number | null>();
  const next: Record<string, DeliveryEntry> = { ...(existing ?? {}) };
  const tokens = new Map<string, string>();

  for (const ep of targets) {
    const id = ep.id as string;
    const token = randomUUID();
    tokens.set(id, token);
    const prev = existing?.[id];
    const retryIndex = prev ? keptRetryIndex(prev) : beforeFanOut ? 0 : null;
    retryIndexes.set(id, retryIndex);
    next[id] = prev
      ? { ...prev, status: 'pending', next_token: token, next_attempt_at: at.toISOString(), retry_index: retryIndex, next_replay: true }
      : { ...newEntry(at, token), retry_index: retryIndex, next_replay: true };
  }

  for (const ep of targets) {
    const id = ep.id as string;
    await sendAttempt({
      kind: 'webhook.attempt',
      event_id: ev.id as string,
      endpoint_id: id,
      org_id: p.orgId,
      environment: p.env,
      token: tokens.get(id)!,
      expect_attempts: next[id]!.attempts,
      retry_index: retryIndexes.get(id) ?? 0,
      replay: true,
      keep_retries: retryIndexes.get(id) != null,
      due_at: at.toISOString(),
      created_ms: Date.now(),
    });
  }

  // The whole map at once: an expression of constant size whatever the number of endpoints (an
  // update expression holds at most 4 KB). Safe, as the write is conditional on the version read.
  const tx = new Tx();
  const dv = ev.dv;
  // The aggregate version goes to the new version too: an aggregate computed from an earlier one
  // and written late (delivery-store.ts writeAggregate) cannot turn this `pending` back.
  const values: Record<string, unknown> = { ':pending': 'pending', ':one': 1, ':all': next, ':next': Number(dv ?? 0) + 1 };
  tx.update('event', keys.event(ev.id as string), 'SET delivery_status = :pending, deliveries = :all, ds_version = :next ADD dv :one', {
    condition: dv === undefined ? 'attribute_exists(PK) AND attribute_not_exists(dv)' : 'dv = :dv',
    values: dv === undefined ? values : { ...values, ':dv': dv },
  });
  audit(tx, {
    orgId: p.orgId,
    eventType: 'webhook_event.replayed',
    actor: ctx.actor,
    env: p.env,
    resource: { type: 'webhook_event', id: ev.id as string },
    requestId: ctx.requestId,
    data: { endpoint_ids: targets.map((t) => t.id) },
  });
  const view = presentEvent({ ...ev, deliveries: next, delivery_status: 'pending' });
  recordResponse(ctx, tx, view);
  await tx.commit();
  return view;
}

/**
 * The schedule position a replay keeps: a delivery still pending is being retried (or awaits its
 * first attempt) unless its pending attempt is itself a replay without retries (null). An entry
 * written before positions were recorded counts its attempts, as it had no replay.
 */
function keptRetryIndex(prev: DeliveryEntry): number | null {
  if (prev.status !== 'pending') return null;
  return prev.retry_index === undefined ? prev.attempts : prev.retry_index;
}
