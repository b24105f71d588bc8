/**
 * Buyer override of a verdict (D71): `POST /v1/submissions/{id}/override`.
 *
 * Within OVERRIDE_WINDOW_MS (7 days) of `scored_at`, once per submission:
 * - approve a `rejected` or `retry_pending` submission while the job is open, filled or
 *   in_progress with a free slot: the normal approval (D29: Files, duplicate guards and
 *   near-duplicate index, `deduction`, worker payout, job.completed when it fills the job);
 * - reject an `approved` submission of a job that is not cancelled: its Files are withdrawn, the
 *   money goes back to the job's escrow as a `reversal` row, the worker payout is reversed, a
 *   completed job reopens (override-withdraw.ts).
 * Every other case is 409 `conflict` with `details[0].code` `invalid_state`,
 * `override_window_closed`, `job_cancelled` or `no_free_slot` (checked in that order).
 *
 * One transaction per override: the submission (conditioned on its status, its upload round and
 * having no override yet), the job (conditioned on the counters read), the ledger rows, the
 * payout, the events (`submission.overridden`, plus the approval's own events), the audit record
 * and the idempotency response. Concurrent overrides of one submission: exactly one commits; the
 * others re-read and answer 409 `invalid_state`, so money moves once.
 */
import { nowIso } from '../clock';
import { Tx, isContention } from '../db/tx';
import { mayRebuildStale } from '../db/conflicts';
import { ConditionFailed, errors } from '../errors';
import { logger } from '../logger';
import { recordResponse, type MutationContext } from '../context';
import { getJobItem } from '../jobs';
import { approvedFileUrl } from '../files';
import { reconcileAvailability } from './slots';
import { getSubmissionItem } from './reservations';
import { uploadObjectKeys } from './verdict';
import { roundKeyframeKeys, tagVerdict } from '../storage/s3';
import { REJECTED_RETENTION_DAYS } from '../storage/lifecycle';
import { presentSubmission, type SubmissionItem } from './model';
import { StaleRead } from './override-withdraw';
import { conflict, overrideConflict, type OverrideInput } from './override-rules';
import { addOverrideApproval, addOverrideRejection, codesAfter, overrideRecord, statusAfterOverride } from './override-writes';

export { OVERRIDE_REASON_CODES, OVERRIDE_WINDOW_MS, overrideConflict, type OverrideConflict, type OverrideInput, type OverrideReasonCode } from './override-rules';

const MAX_ATTEMPTS = 30;
/** Reads again after `Contention` (each one after at least 4 s of Tx.commit's retries). */
const MAX_CONTENDED_READS = 2;
const backoff = (attempt: number) => new Promise((r) => setTimeout(r, Math.random() * Math.min(250, 8 * 2 ** attempt)));

/**
 * A stale snapshot (a condition other than the bytes' hash guard failed), or conflicts that outlasted
 * Tx.commit's own retries (`Contention`; Tx.commit lets no raw TransactionCanceledException of a
 * conflict out): read the submission again, so a loser answers what it finds (`invalid_state`).
 */
const retryable = (e: unknown) => (e instanceof ConditionFailed && !e.reasons.every((r) => r?.startsWith('hash:'))) || isContention(e);

/** POST /v1/submissions/{id}/override. Returns the buyer's view of the submission. */
export async function overrideSubmission(ctx: MutationContext, first: SubmissionItem, input: OverrideInput) {
  if (input.decision === 'reject' && !input.reason_code) throw errors.validation('reason_code is required to reject.', [{ field: 'reason_code', message: 'required to reject', code: 'required' }]);
  let contended = 0;
  const since = Date.now();
  for (let attempt = 0; ; attempt++) {
    // Read consistently every time, the submission before the job (a concurrent override that
    // committed in between is then seen on the job, and the build below says stale).
    const sub = (await getSubmissionItem(first.id)) ?? first;
    const job = await getJobItem(sub.job_id, true);
    const refused = overrideConflict(sub, job, input.decision);
    if (refused) throw refused;
    const at = nowIso();
    const tx = new Tx();
    try {
      if (input.decision === 'approve') addOverrideApproval(tx, ctx, sub, job!, input, at);
      else await addOverrideRejection(tx, ctx, sub, job!, input, at);
    } catch (e) {
      if (!(e instanceof StaleRead)) throw e;
      // Still changing after every round we may spend: nothing was written, the caller may retry.
      if (attempt >= MAX_ATTEMPTS || !mayRebuildStale(since)) throw errors.conflict('The submission changed while the request ran; retry.', undefined, { 'Retry-After': '1' });
      await backoff(attempt);
      continue;
    }
    const after: SubmissionItem = {
      ...sub,
      status: input.decision === 'approve' ? 'approved' : 'rejected',
      override: overrideRecord(input, at),
      reason_codes: codesAfter(statusAfterOverride(input), input),
      file_ids: input.decision === 'approve' ? sub.uploads.map((u) => u.file_id) : [],
    };
    const view = presentSubmission(after, await approvedFileUrl(after));
    recordResponse(ctx, tx, view);
    // Approving by override: the bytes stop being "rejected" BEFORE the commit, so the lifecycle rule
    // that expires rejected bytes can never delete an approved file (a failed commit leaves bytes
    // tagged approved, which only keeps them longer).
    if (input.decision === 'approve') {
      const uploads = uploadObjectKeys(sub);
      const missing = await tagVerdict(uploads, 'approved');
      if (missing.length > 0) {
        // Bytes the lifecycle already deleted (a verdict that came very late): nothing to deliver,
        // so nothing is charged; the files still there go back to `rejected`, so the lifecycle
        // rule still deletes them.
        const present = uploads.filter((k) => !missing.includes(k));
        await tagVerdict(present, 'rejected').catch((err: Error) => logger.warn('re-tagging rejected bytes failed; they are kept', { error: err, submission_id: sub.id }));
        throw conflict('invalid_state', `The files of this submission were deleted (rejected files are kept ${REJECTED_RETENTION_DAYS} days after upload); it can no longer be approved.`);
      }
      // A video's keyframes are delivered with its File: kept too (a missing one is not needed to approve).
      await tagVerdict(roundKeyframeKeys(sub), 'approved');
    }
    // An approval that does not commit in the end leaves the submission rejected: its objects go
    // back to `rejected`, so the lifecycle rule still deletes them (best effort, logged). Unless the
    // submission is approved after all: a concurrent override of it committed, or this commit's
    // outcome is unknown and it did commit (read again consistently).
    const untag = async () => {
      if (input.decision !== 'approve') return;
      const latest = await getSubmissionItem(sub.id).catch(() => undefined);
      if (!latest || latest.status === 'approved' || latest.override) return;
      await tagVerdict([...uploadObjectKeys(sub), ...roundKeyframeKeys(sub)], 'rejected').catch((err: Error) => logger.warn('re-tagging rejected bytes failed; they are kept', { error: err, submission_id: sub.id }));
    };
    try {
      await tx.commit();
    } catch (e) {
      // The bytes approved elsewhere in the organization, and nothing else changed: a conflict. When
      // the submission changed too (a concurrent override committed), the retry reads it and says so.
      if (e instanceof ConditionFailed && e.reasons.some((r) => r?.startsWith('hash:')) && !e.reasons.includes('submission')) {
        await untag();
        throw conflict('invalid_state', 'Identical bytes are already approved in this organization; the submission cannot be approved.');
      }
      // Contention has waited its own seconds already: read again twice at most, within the route's time.
      if (isContention(e) && ++contended > MAX_CONTENDED_READS) {
        await untag();
        throw e;
      }
      if (retryable(e) && attempt < MAX_ATTEMPTS && mayRebuildStale(since)) {
        await backoff(attempt);
        continue;
      }
      await untag();
      throw e;
    }
    // A withdrawal's objects are deleted by the `withdrawals` queue: its event's INSERT record,
    // committed above, queues the deletion (shared/work/withdrawn-objects.ts).
    await reconcileAvailability(sub.job_id).catch((err: Error) => logger.error('reconcile availability failed', { error: err, job_id: sub.job_id }));
    return view;
  }
}
