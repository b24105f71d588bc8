/**
 * Event records as buyers list them (D38): the envelope (D35) plus the delivery status and the
 * per-endpoint deliveries maintained by the dispatcher.
 */
import { queryPage, listBody } from '../db/query';
import { indexKeys } from '../db/keys';
import { ulidFloor } from '../ids';
import { now } from '../clock';
import { EVENT_RETENTION_MS } from '../outbox';
import type { BuyerPrincipal } from '../types';

type Item = Record<string, unknown>;

export function presentEvent(item: Item) {
  const deliveries = Object.entries((item.deliveries as Record<string, Item> | undefined) ?? {}).map(([endpointId, d]) => ({
    endpoint_id: endpointId,
    status: d.status,
    attempts: d.attempts ?? 0,
    last_status_code: d.last_status_code ?? null,
    last_attempt_at: d.last_attempt_at ?? null,
    // Why the last attempt failed, or why the delivery ended without one (endpoint_disabled,
    // endpoint_deleted, endpoint_unsubscribed): a short code, null after a success.
    last_error: d.last_error ?? null,
    next_attempt_at: d.next_attempt_at ?? null,
  }));
  return {
    ...(item.envelope as Item),
    delivery_status: item.delivery_status,
    deliveries,
  };
}

export async function listEvents(
  p: BuyerPrincipal,
  q: { type?: string; delivery_status?: string; created_after?: string; limit: number; cursor?: string },
) {
  const ix = q.type ? indexKeys.tenantEventsByType(p.orgId, p.env, q.type) : indexKeys.tenantEvents(p.orgId, p.env);
  const page = await queryPage<Item>({
    index: ix.index,
    pk: ix.pk,
    // Events are kept 30 days (D38): older ones are left out here, not only once DynamoDB's TTL
    // (which may take days) has deleted them.
    skAfter: ulidFloor('event', new Date(Math.max(q.created_after ? Date.parse(q.created_after) + 1 : 0, now().getTime() - EVENT_RETENTION_MS))),
    ...(q.delivery_status
      ? { filter: { expression: '#ds = :ds', names: { '#ds': 'delivery_status' }, values: { ':ds': q.delivery_status } } }
      : {}),
    limit: q.limit,
    cursor: q.cursor,
    binding: JSON.stringify(['events', p.orgId, p.env, q.type ?? null, q.delivery_status ?? null, q.created_after ?? null]),
  });
  return listBody(page.items.map(presentEvent), page);
}
