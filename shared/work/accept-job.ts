/**
 * Accepting a job (D23, D24, D45): reserves `files_per_submission` slots for 60 minutes and creates
 * the submission `awaiting_upload`, in one transaction with the job counters (slots.ts), the
 * reservation item (reservations.ts) and the audit record. A reservation of the worker's that has
 * expired but is not swept yet is released first (release-reservation.ts).
 */
import { Tx } from '../db/tx';
import { keys } from '../db/keys';
import { idsAt } from '../ids';
import { addMs, now } from '../clock';
import { audit } from '../audit';
import { ConditionFailed, errors } from '../errors';
import { recordResponse, systemContext, type MutationContext } from '../context';
import { freeSlots, type JobItem } from '../jobs/model';
import { addSlotChange, withJobRetry } from './slots';
import { presentWorkerSubmission, RESERVATION_MS, submissionIndexes, type SubmissionItem } from './model';
import type { WorkerPrincipal } from '../types';
import { getReservation, isExpired, reservationItem } from './reservations';
import { releaseReservation, uploadBeingChecked } from './release-reservation';

const noSlots = (job: JobItem, fps: number) =>
  errors.conflict(
    freeSlots(job) <= 0
      ? 'This job has no free slots right now.'
      : `This job needs ${fps} free slots per submission; only ${freeSlots(job)} are free.`,
    [{ field: 'job_id', message: 'no free slots', code: 'no_free_slots' }],
  );

/** POST /internal/worker/jobs/{id}/accept (D23, D24, D45): 201 with the worker view of the new submission. */
export async function acceptJob(ctx: MutationContext, worker: WorkerPrincipal, jobId: string) {
  const since = Date.now(); // the rebuilds here and in a release below count from here
  return withJobRetry(jobId, async (job) => {
    const fps = Number(job.files_per_submission ?? 1);
    if (job.status !== 'open' && job.status !== 'in_progress' && job.status !== 'filled') {
      throw errors.conflict(`This job is ${job.status} and takes no new submissions.`, [
        { field: 'job_id', message: `job is ${job.status}`, code: `job_${job.status}` },
      ]);
    }
    const existing = await getReservation(job.id, worker.workerId);
    if (existing && !isExpired(existing)) {
      throw errors.conflict('You already hold an active reservation on this job.', [
        { field: 'job_id', message: 'active reservation exists', code: 'reservation_exists' },
      ]);
    }
    if (existing) {
      // Expired but not swept yet: free it first, then decide on fresh counters.
      if (!(await releaseReservation(systemContext('reservation-sweep'), existing, 'expired', { graceForLandedFiles: true, since }))) {
        const still = await getReservation(job.id, worker.workerId);
        // Its pre-signed files may have landed in time and are being checked (PRESIGNED_GRACE_MS).
        if (still && still.reserved_until === existing.reserved_until) throw uploadBeingChecked();
      }
      throw new ConditionFailed(['job']);
    }
    // Filled: no slot is free, unless one of them is the worker's own expired reservation (above).
    if (job.status === 'filled') throw noSlots(job, fps);
    // D23: a submission reserves files_per_submission slots; when fewer are left (files_needed not a
    // multiple of it, or a submission that sent fewer files), the last one takes what is left, so
    // the job can still be completed.
    const take = Math.min(fps, freeSlots(job));
    if (take < 1) throw noSlots(job, fps);

    // Each try has its own id, carrying its created_at (D1), so the worker's history lists a
    // submission whose accept committed on a later try where its created_at says.
    const atDate = now();
    const at = atDate.toISOString();
    const subId = idsAt('submission', atDate)();
    const reservedUntil = addMs(atDate, RESERVATION_MS).toISOString();
    const tx = new Tx();
    tx.create('reservation', reservationItem({ job_id: job.id, worker_id: worker.workerId, submission_id: subId, slots: take, phase: 'upload', reserved_until: reservedUntil }));
    addSlotChange(tx, job, { reserved: take });
    const base = { id: subId, org_id: job.org_id, environment: job.environment, job_id: job.id, worker_id: worker.workerId };
    const sub: SubmissionItem & { PK: string; SK: string } = {
      ...keys.submission(subId),
      ...submissionIndexes(base).worker,
      entity: 'submission',
      ...base,
      job_type: job.type,
      status: 'awaiting_upload',
      attempt: 1,
      files_expected: take,
      reserved_until: reservedUntil,
      round: null,
      uploads: [],
      device: {},
      parts: {},
      category: null,
      ai_star_rating: null,
      ai_reasoning: null,
      dimensions: null,
      file_ids: [],
      submitted_at: null,
      scored_at: null,
      created_at: at,
      updated_at: at,
    };
    tx.create('submission', sub);
    audit(tx, {
      orgId: job.org_id,
      eventType: 'submission.accepted',
      actor: ctx.actor,
      env: job.environment,
      resource: { type: 'submission', id: subId },
      jobId: job.id,
      requestId: ctx.requestId,
      data: { worker_id: worker.workerId, slots: take, reserved_until: reservedUntil },
    });
    const view = presentWorkerSubmission(sub);
    recordResponse(ctx, tx, view, 201);
    try {
      await tx.commit();
    } catch (e) {
      if (e instanceof ConditionFailed && e.reasons.includes('reservation')) {
        throw errors.conflict('You already hold an active reservation on this job.', [
          { field: 'job_id', message: 'active reservation exists', code: 'reservation_exists' },
        ]);
      }
      throw e;
    }
    return view;
  }, undefined, undefined, since);
}
