/**
 * Ending reservations (D23, D45): withdraw (the worker), expiry (the sweep) and the job's
 * cancellation give the slots back. The D27 retry window is a reservation too (phase `retry`):
 * when it ends unused the submission's first verdict becomes final (rejected).
 *
 * Every change is one transaction with the job counters (slots.ts), the submission, the audit
 * record and, for a final rejection, its event. The sweep reads the reservation item's sparse
 * expiry index (reservations.ts), so slots come back without any request.
 */
import { paginateQuery } from '@aws-sdk/lib-dynamodb';
import { db, tableName } from '../db/client';
import { keys, indexKeys, RESERVATION_SHARDS } from '../db/keys';
import { Tx } from '../db/tx';
import { now, nowIso } from '../clock';
import { audit } from '../audit';
import { emit } from '../outbox';
import { ConditionFailed, errors } from '../errors';
import { logger } from '../logger';
import { systemContext, type MutationContext } from '../context';
import { categoryOf } from '../jobs/model';
import { summaryUpdate as summaryClauses } from './summary';
import { addSlotChange, withJobRetry } from './slots';
import { presentWorkerSubmission, retryInFlight, type SubmissionItem } from './model';
import type { WorkerPrincipal } from '../types';
import { roundKeyframeKeys, roundObjectKeys, tagUndelivered } from '../storage/s3';
import { getReservation, getSubmissionItem, isExpired, reread, reservationKey, type ReservationItem } from './reservations';

/**
 * A window whose pre-signed files may have landed just before its end: the scoring stage needs
 * time to fetch and check them (a large video takes seconds), and it completes the upload by when
 * the files landed (complete-upload.ts). The sweep leaves such a window this long after its end.
 */
export const PRESIGNED_GRACE_MS = 15 * 60_000; // ≥ the scoring queue's visibility timeout + 2 min (a crashed first check comes back once): test/unit/manifest.test.ts

export const uploadBeingChecked = () =>
  errors.conflict('Your files for this job are still being checked; try again in a few minutes.', [{ field: 'job_id', message: 'upload being checked', code: 'upload_being_checked' }], { 'Retry-After': '60' });

/** The window's round is a pre-signed plan whose files the pipeline may still be checking. */
function presignedPlanPending(sub: SubmissionItem, res: ReservationItem): boolean {
  const planned = (sub.uploads ?? []).some((u) => u.mode === 'presigned');
  // A file refused by its byte check cannot be sent again after the window: that plan is dead.
  if (!planned || Object.values(sub.parts ?? {}).some((p) => p.upload_error)) return false;
  return res.phase === 'upload' ? sub.status === 'awaiting_upload' : sub.status === 'retry_pending' && retryInFlight(sub);
}

/** Why a reservation ends: the worker gave it back, it ran out, or its job was cancelled. */
export type ReleaseReason = 'withdrawn' | 'expired' | 'cancelled';

const RETRY_ENDED: Record<ReleaseReason, string> = {
  withdrawn: 'The worker withdrew instead of retrying.',
  expired: 'The retry window ended without a new upload.',
  cancelled: 'The job was cancelled before the retry.',
};

/**
 * Ends a reservation: withdraw (the worker), expiry (the sweep) or the job's cancellation
 * (cancelled-job.ts). Phase `upload`: the submission becomes `withdrawn` / `expired` /
 * `cancelled` and its reserved slots come back. Phase `retry`: the unused retry makes the first
 * verdict final (`rejected`), and its pending slots come back. Returns false when the reservation
 * changed meanwhile (someone else ended or used it).
 */
export async function releaseReservation(ctx: MutationContext, res: ReservationItem, reason: ReleaseReason, opts: { graceForLandedFiles?: boolean; since?: number } = {}): Promise<boolean> {
  try {
    return await withJobRetry(res.job_id, async (job) => {
      const current = await reread(res);
      if (!current || current.submission_id !== res.submission_id || current.reserved_until !== res.reserved_until) return false;
      const sub = await getSubmissionItem(res.submission_id);
      if (!sub) return false;
      if (opts.graceForLandedFiles && reason === 'expired' && presignedPlanPending(sub, res) && now().getTime() < new Date(res.reserved_until).getTime() + PRESIGNED_GRACE_MS) {
        return false; // the next sweep looks again
      }
      const at = nowIso();
      const tx = new Tx();
      tx.delete('reservation', reservationKey(res), {
        condition: 'submission_id = :sid AND reserved_until = :ru',
        values: { ':sid': res.submission_id, ':ru': res.reserved_until },
      });
      if (res.phase === 'upload') {
        if (sub.status !== 'awaiting_upload') return false;
        addSlotChange(tx, job, { reserved: -Number(res.slots) });
        tx.update('submission', keys.submission(sub.id), 'SET #s = :st, updated_at = :t, ended_at = :t, reserved_until = :null', {
          condition: '#s = :aw',
          names: { '#s': 'status' },
          values: { ':st': reason, ':t': at, ':aw': 'awaiting_upload', ':null': null },
        });
        audit(tx, {
          orgId: sub.org_id,
          eventType: `submission.${reason}`,
          actor: ctx.actor,
          env: sub.environment,
          resource: { type: 'submission', id: sub.id },
          jobId: sub.job_id,
          requestId: ctx.requestId,
          data: { worker_id: sub.worker_id, slots: Number(res.slots) },
        });
      } else {
        if (sub.status !== 'retry_pending') return false;
        const held = Number(sub.slots_held ?? 0);
        const stars = Number(sub.ai_star_rating ?? 1);
        const cat = sub.category ?? categoryOf((job.accepted_formats as string[])[0] ?? 'image/jpeg');
        addSlotChange(tx, job, { pending: -held, extra: summaryClauses(cat, 'rejected', stars) });
        const reasoning = `${sub.ai_reasoning ?? ''} ${RETRY_ENDED[reason]}`.trim();
        // D68: the codes of the retry_pending verdict still say what fell short.
        const codes = (sub.reason_codes as string[] | undefined) ?? [];
        tx.update('submission', keys.submission(sub.id), 'SET #s = :st, updated_at = :t, ai_reasoning = :r, reason_codes = :codes, reserved_until = :null, final_at = :t', {
          condition: '#s = :rp',
          names: { '#s': 'status' },
          values: { ':st': 'rejected', ':t': at, ':rp': 'retry_pending', ':r': reasoning, ':codes': codes, ':null': null },
        });
        emit(tx, {
          orgId: sub.org_id,
          env: sub.environment,
          type: 'submission.rejected',
          jobId: sub.job_id,
          data: { job_id: sub.job_id, submission_id: sub.id, ai_star_rating: stars, ai_reasoning: reasoning, reason_codes: codes },
        });
        audit(tx, {
          orgId: sub.org_id,
          eventType: 'submission.rejected',
          actor: ctx.actor,
          env: sub.environment,
          resource: { type: 'submission', id: sub.id },
          jobId: sub.job_id,
          requestId: ctx.requestId,
          data: { ai_star_rating: stars, reason: `retry_${reason}` },
        });
      }
      await tx.commit();
      // Bytes of the round that landed are never delivered now (an ended retry keeps the first
      // verdict, a rejection): tagged for the lifecycle rule, as a verdict's rejection is (D71).
      await tagUndelivered([...roundObjectKeys(sub), ...roundKeyframeKeys(sub)], { submission_id: sub.id, reason });
      return true;
    }, undefined, undefined, opts.since);
  } catch (e) {
    if (e instanceof ConditionFailed && (e.reasons.includes('reservation') || e.reasons.includes('submission'))) return false;
    throw e;
  }
}

/** POST /internal/worker/jobs/{id}/withdraw: gives the worker's reservation back. */
export async function withdrawFromJob(ctx: MutationContext, worker: WorkerPrincipal, jobId: string) {
  const since = Date.now(); // every round's rebuilds count from here
  for (let attempt = 0; attempt < 5; attempt++) {
    const res = await getReservation(jobId, worker.workerId);
    if (!res) {
      throw errors.conflict('You hold no reservation on this job.', [{ field: 'job_id', message: 'no active reservation', code: 'no_reservation' }]);
    }
    const expired = isExpired(res);
    if (await releaseReservation(ctx, res, expired ? 'expired' : 'withdrawn', { graceForLandedFiles: expired, since })) {
      const sub = (await getSubmissionItem(res.submission_id))!;
      return presentWorkerSubmission(sub);
    }
    const still = expired ? await getReservation(jobId, worker.workerId) : null;
    if (still && still.reserved_until === res.reserved_until) throw uploadBeingChecked();
  }
  throw errors.conflict('The reservation changed while withdrawing; retry.', undefined, { 'Retry-After': '1' });
}

/**
 * The reservation sweep (schedule `reservation-sweep`, every minute): every reservation whose
 * `reserved_until` has passed is released, shard by shard, oldest first. Returns how many.
 */
export async function sweepExpiredReservations(limitPerShard = 200): Promise<number> {
  const ctx = systemContext('reservation-sweep');
  const cutoff = nowIso();
  let released = 0;
  await Promise.all(
    RESERVATION_SHARDS.map(async (shard) => {
      const ix = indexKeys.reservationExpiryShard(shard);
      let seen = 0;
      const pages = paginateQuery(
        { client: db(), pageSize: 50 },
        {
          TableName: tableName(),
          IndexName: ix.index,
          KeyConditionExpression: 'GSI1PK = :pk AND GSI1SK < :cut',
          ExpressionAttributeValues: { ':pk': ix.pk, ':cut': cutoff },
          ScanIndexForward: true,
        },
      );
      for await (const page of pages) {
        for (const it of (page.Items ?? []) as ReservationItem[]) {
          seen++;
          const fresh = await reread(it);
          if (!fresh || !isExpired(fresh)) continue;
          try {
            if (await releaseReservation(ctx, fresh, 'expired', { graceForLandedFiles: true })) released++;
          } catch (err) {
            logger.error('reservation sweep: release failed', { error: err as Error, job_id: it.job_id, worker_id: it.worker_id });
          }
        }
        if (seen >= limitPerShard) break;
      }
    }),
  );
  return released;
}
