/**
 * Audit trail (D39): every mutating action adds one audit record to its own transaction.
 * Audit events are per organization (both environments, D3).
 */
import { keys, gsi, indexKeys } from './db/keys';
import { queryPage, listBody } from './db/query';
import { newId } from './ids';
import { nowIso } from './clock';
import type { Tx } from './db/tx';
import type { Actor, Env } from './types';

export interface AuditInput {
  orgId: string;
  eventType: string;
  actor: Actor;
  env: Env | null;
  resource: { type: string; id: string };
  jobId?: string | null;
  requestId: string | null;
  data?: Record<string, unknown>;
}

export function audit(tx: Tx, a: AuditInput): string {
  const id = newId('audit');
  tx.create(`audit:${a.eventType}`, {
    ...keys.audit(a.orgId, id),
    ...gsi.audit(a.orgId, a.eventType, id, a.jobId ?? null),
    entity: 'audit_event',
    id,
    org_id: a.orgId,
    event_type: a.eventType,
    actor: a.actor,
    environment: a.env,
    resource: a.resource,
    job_id: a.jobId ?? null,
    request_id: a.requestId,
    data: a.data ?? {},
    created_at: nowIso(),
  });
  return id;
}

export function presentAudit(item: Record<string, unknown>) {
  return {
    object: 'audit_event' as const,
    id: item.id,
    event_type: item.event_type,
    actor: item.actor,
    environment: item.environment ?? null,
    resource: item.resource,
    job_id: item.job_id ?? null,
    request_id: item.request_id ?? null,
    created_at: item.created_at,
    data: item.data ?? {},
  };
}

/** GET /v1/audit-events (D39): newest first, filters job_id and event_type. */
export async function listAudit(orgId: string, q: { job_id?: string; event_type?: string; limit: number; cursor?: string }) {
  const ix = q.job_id
    ? indexKeys.orgAuditByJob(orgId, q.job_id)
    : q.event_type
      ? indexKeys.orgAuditByType(orgId, q.event_type)
      : indexKeys.orgAudit(orgId);
  const page = await queryPage<Record<string, unknown>>({
    index: ix.index,
    pk: ix.pk,
    limit: q.limit,
    cursor: q.cursor,
    binding: JSON.stringify(['audit', orgId, q.job_id ?? null, q.event_type ?? null]),
    ...(q.job_id && q.event_type
      ? { filter: { expression: '#et = :et', names: { '#et': 'event_type' }, values: { ':et': q.event_type } } }
      : {}),
  });
  return listBody(page.items.map(presentAudit), page);
}
