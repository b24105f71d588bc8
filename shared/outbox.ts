/**
 * The outbox (D35): an event record is added to the transaction of the state change it describes,
 * so no state change exists without its event and no event without its state change. The table
 * stream carries every new event to the webhook dispatcher (STREAM_RULES in shared/manifest/wiring.ts).
 */
import { keys, gsi } from './db/keys';
import { idsAt } from './ids';
import { now, DAY_MS } from './clock';
import type { Tx } from './db/tx';
import type { Env } from './types';
import { sendable } from './sendable-text';

export const API_VERSION = '2026-03-18';

export const EVENT_TYPES = [
  'submission.approved',
  'submission.rejected',
  'submission.scored',
  'submission.overridden',
  'job.created',
  'job.completed',
  'job.cancelled',
  'job.flagged',
  'credits.purchased',
  'credits.low_balance',
  'credits.auto_topped_up',
  'credits.auto_top_up_failed',
  'credits.expiring_soon',
  'credits.expired',
  'export.completed',
  'export.failed',
] as const;
export type EventType = (typeof EVENT_TYPES)[number];

/** D38: events are kept 30 days. */
export const EVENT_RETENTION_MS = 30 * DAY_MS;

export interface EventEnvelope {
  id: string;
  object: 'event';
  type: EventType;
  api_version: string;
  created_at: string;
  environment: Env;
  data: Record<string, unknown>;
}

export interface EmitInput {
  orgId: string;
  env: Env;
  type: EventType;
  data: Record<string, unknown>;
  /** Optional: related job, for listing and filtering. */
  jobId?: string | null;
}

/** Add an event to `tx`; returns the envelope exactly as it will be delivered. */
export function emit(tx: Tx, input: EmitInput): EventEnvelope {
  // The id's time is the event's `created_at` (listing with `created_after` compares ids), and the
  // events of one commit sort as they were emitted.
  const at = (tx.eventTime ??= now());
  const id = (tx.eventIds ??= idsAt('event', at))();
  const envelope: EventEnvelope = {
    id,
    object: 'event',
    type: input.type,
    api_version: API_VERSION,
    created_at: at.toISOString(),
    environment: input.env,
    // Text no caller wrote (a model's words) may hold a character SQS refuses: replaced, so the
    // event can always be delivered (shared/sendable-text.ts).
    data: sendable(input.data),
  };
  tx.create(`event:${input.type}`, {
    ...keys.event(id),
    ...gsi.event(input.orgId, input.env, input.type, id),
    entity: 'event',
    id,
    type: input.type,
    org_id: input.orgId,
    environment: input.env,
    job_id: input.jobId ?? null,
    envelope,
    // Aggregate delivery status for the D38 filter; the dispatcher maintains it.
    delivery_status: 'pending',
    created_at: envelope.created_at,
    ttl: Math.floor((at.getTime() + EVENT_RETENTION_MS) / 1000),
  });
  return envelope;
}
