/**
 * Reservations (D23, D45): the reservation item and its reads. Accept reserves
 * `files_per_submission` slots for 60 minutes (accept-job.ts); withdraw, expiry and the job's
 * cancellation give them back (release-reservation.ts). The D27 retry window is a reservation too
 * (phase `retry`): its slots already count as pending.
 *
 * The reservation item (`keys.reservation(job, worker)`) is the guard "one active reservation per
 * worker per job" and carries the sparse expiry index (`gsi.reservationExpiry`) the sweep reads,
 * so slots come back without any request.
 */
import { GetCommand } from '@aws-sdk/lib-dynamodb';
import { db, tableName } from '../db/client';
import { keys, gsi } from '../db/keys';
import { now, nowIso, DAY_MS } from '../clock';
import type { SubmissionItem } from './model';

export interface ReservationFields {
  job_id: string;
  worker_id: string;
  submission_id: string;
  /** slots held in slots_reserved (phase upload); 0 in phase retry (they are in files_pending) */
  slots: number;
  phase: 'upload' | 'retry';
  reserved_until: string;
}
export type ReservationItem = Record<string, unknown> & ReservationFields;

/** Upload reservations are one per worker per job; retry windows one per submission. */
export const reservationKey = (r: Pick<ReservationItem, 'phase' | 'job_id' | 'worker_id' | 'submission_id'>) =>
  r.phase === 'retry' ? keys.retryWindow(r.submission_id) : keys.reservation(r.job_id, r.worker_id);

export function reservationItem(input: ReservationFields) {
  return {
    ...reservationKey(input),
    ...gsi.reservationExpiry(input.reserved_until, input.job_id, input.worker_id),
    entity: 'reservation',
    ...input,
    created_at: nowIso(),
    // cleanup only: expiry is checked in code (the sweep), never left to TTL
    ttl: Math.floor((new Date(input.reserved_until).getTime() + DAY_MS) / 1000),
  };
}

export async function getReservation(jobId: string, workerId: string): Promise<ReservationItem | undefined> {
  const out = await db().send(new GetCommand({ TableName: tableName(), Key: keys.reservation(jobId, workerId), ConsistentRead: true }));
  return out.Item as ReservationItem | undefined;
}

export async function getRetryWindow(subId: string): Promise<ReservationItem | undefined> {
  const out = await db().send(new GetCommand({ TableName: tableName(), Key: keys.retryWindow(subId), ConsistentRead: true }));
  return out.Item as ReservationItem | undefined;
}

export const reread = (r: ReservationItem) => (r.phase === 'retry' ? getRetryWindow(r.submission_id) : getReservation(r.job_id, r.worker_id));

export async function getSubmissionItem(subId: string): Promise<SubmissionItem | undefined> {
  const out = await db().send(new GetCommand({ TableName: tableName(), Key: keys.submission(subId), ConsistentRead: true }));
  return out.Item as SubmissionItem | undefined;
}

export const isExpired = (r: ReservationItem) => new Date(r.reserved_until).getTime() <= now().getTime();
