/**
 * `POST /v1/webhook_events/{id}/replay` (D37, D48): re-delivers the event, with the same event id,
 * to every enabled endpoint subscribed to its type (or the one named by `endpoint_id`). A replay is
 * one fresh attempt per endpoint, signed at send time; it does not restart the retry schedule.
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
        if ((e as Error).name === 'ConditionFailed') throw errors.conflict('The event is being delivered right now; retry the replay.');
        throw e;
      }
    }
  }
}

async function replayOnce(ctx: MutationContext, p: BuyerPrincipal, ev: Item, endpointId?: string) {
  const targets = (await allEndpoints(p.orgId, p.env)).filter(
    (e) => (endpointId ? e.id === endpointId : true) && e.status === 'enabled' && subscribes(e, ev.type as string),
  );
  if (!targets.length) {
    throw endpointId
      ? errors.conflict(`Webhook endpoint ${endpointId} does not exist, is disabled, or is not subscribed to ${String(ev.type)}.`)
      : errors.conflict(`No enabled webhook endpoint is subscribed to ${String(ev.type)}; nothing to replay to.`);
  }
  const at = now();
  const existing = (ev.deliveries as Record<string, DeliveryEntry> | undefined) ?? null;
  const next: Record<string, DeliveryEntry> = { ...(existing ?? {}) };
  const names: Record<string, string> = {};
  const values: Record<string, unknown> = { ':pending': 'pending', ':one': 1 };
  const sets: string[] = ['delivery_status = :pending'];
  const tokens = new Map<string, string>();

  targets.forEach((ep, i) => {
    const id = ep.id as string;
    const token = randomUUID();
    tokens.set(id, token);
    const prev = existing?.[id];
    next[id] = prev ? { ...prev, status: 'pending', next_token: token, next_attempt_at: at.toISOString() } : newEntry(at, token);
    if (!existing) return;
    names[`#w${i}`] = id;
    if (prev) {
      values[`:t${i}`] = token;
      names['#st'] = 'status';
      values[':at'] = at.toISOString();
      sets.push(`deliveries.#w${i}.#st = :pending`, `deliveries.#w${i}.next_token = :t${i}`, `deliveries.#w${i}.next_attempt_at = :at`);
    } else {
      values[`:e${i}`] = next[id];
      sets.push(`deliveries.#w${i} = :e${i}`);
    }
  });
  if (!existing) {
    values[':all'] = next;
    sets.push('deliveries = :all');
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
      retry_index: 0,
      replay: true,
      due_at: at.toISOString(),
      created_ms: Date.now(),
    });
  }

  const tx = new Tx();
  const dv = ev.dv;
  tx.update('event', keys.event(ev.id as string), `SET ${sets.join(', ')} ADD dv :one`, {
    condition: dv === undefined ? 'attribute_exists(PK) AND attribute_not_exists(dv)' : 'dv = :dv',
    names,
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
