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
import { addMs, now, nowIso, DAY_MS } from '../clock';
import { REASON_CODES, type ReasonCode } from '../scoring/types';
import { keys } from '../db/keys';
import { Tx, isContention } from '../db/tx';
import { newId } from '../ids';
import { emit } from '../outbox';
import { audit } from '../audit';
import { ConditionFailed, errors } from '../errors';
import { logger } from '../logger';
import { recordResponse, type MutationContext } from '../context';
import { getJobItem } from '../jobs';
import { categoryOf, freeSlots, type Category, type JobItem } from '../jobs/model';
import { addApprovalCharges, approvalAllowed } from '../ledger/escrow';
import { REVERSIBLE_STATUSES } from '../ledger/reversal';
import { approvedFileUrl, fileItem } from '../files';
import { addApprovalIndexes } from '../trust/indexes';
import { reconcileAvailability } from './slots';
import { getSubmissionItem } from './reservations';
import { approvedRef, uploadObjectKeys } from './verdict';
import { annotationsOf } from './verdict-input';
import { addPayoutAndApprovedEvent } from './approval-records';
import { roundKeyframeKeys, tagVerdict } from '../storage/s3';
import { REJECTED_RETENTION_DAYS } from '../storage/lifecycle';
import { presentSubmission, retryInFlight, type SubmissionItem } from './model';
import { addWithdrawal, StaleRead, type Withdrawal } from './override-withdraw';

export const OVERRIDE_WINDOW_MS = 7 * DAY_MS;
/** D68's reason codes and `other`. */
export const OVERRIDE_REASON_CODES = [...REASON_CODES, 'other'] as const;
export type OverrideReasonCode = (typeof OVERRIDE_REASON_CODES)[number];

export interface OverrideInput {
  decision: 'approve' | 'reject';
  reason_code?: OverrideReasonCode | null;
  note?: string | null;
}

export type OverrideConflict = 'invalid_state' | 'override_window_closed' | 'job_cancelled' | 'no_free_slot';

const conflict = (code: OverrideConflict, message: string) => errors.conflict(message, [{ field: 'submission_id', message, code }]);

const MAX_ATTEMPTS = 30;
/** Reads again after `Contention` (each one after at least 4 s of Tx.commit's retries). */
const MAX_CONTENDED_READS = 2;
const backoff = (attempt: number) => new Promise((r) => setTimeout(r, Math.random() * Math.min(250, 8 * 2 ** attempt)));

/** The conflict, if any, for this decision on this submission and job (D71), in the documented order. */
export function overrideConflict(sub: SubmissionItem, job: JobItem | undefined, decision: OverrideInput['decision'], at: Date = now()) {
  const from = decision === 'approve' ? ['rejected', 'retry_pending'] : ['approved'];
  if (sub.override) return conflict('invalid_state', 'This submission was already overridden; an override is final.');
  if (!from.includes(sub.status) || !sub.scored_at) {
    return conflict('invalid_state', `Only ${from.join(' or ')} submissions can be ${decision === 'approve' ? 'approved' : 'rejected'} by override; this one is ${sub.status}.`);
  }
  const closes = addMs(new Date(sub.scored_at), OVERRIDE_WINDOW_MS);
  if (at.getTime() > closes.getTime()) return conflict('override_window_closed', `The override window closed at ${closes.toISOString()}, 7 days after the verdict.`);
  if (!job || job.status === 'cancelled') return conflict('job_cancelled', 'The job is cancelled; its verdicts can no longer change.');
  if (decision === 'reject' && !REVERSIBLE_STATUSES.includes(job.status)) return conflict('invalid_state', `The job is ${job.status}.`);
  if (decision === 'approve') {
    // A retry_pending submission whose worker has started the retry holds a new round that nothing
    // has scored yet: approving now would pay for bytes the buyer never saw (and that may never
    // arrive). The override's transaction is conditioned on the round it read, so a retry that
    // starts after this read makes it fail instead.
    // A retry that was planned and never completed (its files landed and scored or not, or its
    // window ran out) holds files no verdict covered: the same refusal.
    const unscored = sub.uploads.some((u) => !sub.parts?.[u.file_id]?.score);
    if (unscored || retryInFlight(sub)) {
      return conflict(
        'invalid_state',
        sub.status === 'retry_pending'
          ? 'The worker is uploading a retry of this submission; wait for its verdict, then override that.'
          : "This submission's retry never completed, so its files were never judged; they cannot be approved.",
      );
    }
    // A file whose bytes the annotation stage could not decode has no annotations to deliver (D54:
    // a File always carries them): it cannot be approved.
    if (sub.uploads.some((u) => (sub.parts?.[u.file_id] as { annotation_error?: unknown } | undefined)?.annotation_error)) {
      return conflict('invalid_state', 'A file of this submission could not be decoded for annotation; it cannot be delivered, so it cannot be approved.');
    }
    // D26: identical bytes are delivered once per job, so a submission two of whose files are
    // identical (rejected as `duplicate`) cannot be approved whole; its transaction would also
    // name the job's and the tenant's hash items twice, which DynamoDB refuses outright.
    const hashes = sub.uploads.map((u) => sub.parts?.[u.file_id]?.metadata?.content_hash).filter((h): h is string => !!h);
    if (new Set(hashes).size !== hashes.length) {
      return conflict('invalid_state', 'Two files of this submission are identical, and identical bytes are delivered once per job; it cannot be approved.');
    }
    const n = sub.uploads.length;
    // A retry_pending submission still holds its slots in files_pending; a rejected one needs free ones.
    const slotsOk = sub.status === 'retry_pending' ? approvalAllowed(job, n) : approvalAllowed(job, n) && freeSlots(job) >= n;
    if (!slotsOk) return conflict('no_free_slot', `The job has no free slot for ${n} more file${n > 1 ? 's' : ''} (it is ${job.status}).`);
  }
  return null;
}

/**
 * The submission's `reason_codes` after the override (D68 codes only): [] when approved; the
 * buyer's code when rejected (none for `other`, which the override record still carries).
 */
function codesAfter(status: string, input: OverrideInput): ReasonCode[] {
  if (status !== 'rejected' || !input.reason_code || input.reason_code === 'other') return [];
  return [input.reason_code];
}
const statusAfterOverride = (input: OverrideInput) => (input.decision === 'approve' ? 'approved' : 'rejected');

/** The override record shown on the submission. */
const overrideRecord = (input: OverrideInput, at: string) => ({
  decision: input.decision,
  reason_code: input.reason_code ?? null,
  note: input.note ?? null,
  overridden_at: at,
});

/**
 * Summary counters (D50, D56) moved from one final verdict to the other, with the placeholders
 * of `summaryUpdate` (`#sm`, `:ov`): approved ↔ rejected, or a retry_pending (counted in the
 * total only) becoming approved with its stars.
 */
function summaryShift(category: Category, from: string, to: 'approved' | 'rejected', stars: number) {
  const names = { '#smS': 'summary', '#smB': 'by_type', '#smC': category, '#smA': 'approved', '#smR': 'rejected', '#smSum': 'stars_sum', '#smN': 'scored' };
  const values: Record<string, unknown> = { ':ovUp': 1, ':ovDown': -1 };
  const add: string[] = [];
  if (to === 'approved') add.push('#smS.#smA :ovUp', '#smS.#smB.#smC.#smA :ovUp');
  else add.push('#smS.#smA :ovDown', '#smS.#smB.#smC.#smA :ovDown', '#smS.#smR :ovUp');
  if (from === 'rejected') add.push('#smS.#smR :ovDown');
  if (from === 'retry_pending') {
    values[':ovStars'] = stars;
    add.push('#smS.#smSum :ovStars', '#smS.#smN :ovUp', '#smS.#smB.#smC.#smSum :ovStars', '#smS.#smB.#smC.#smN :ovUp');
  }
  // DynamoDB refuses unused placeholders: keep only those the clauses use.
  const used = <T,>(o: Record<string, T>) => Object.fromEntries(Object.entries(o).filter(([k]) => add.some((a) => a.split(/[ .]/).includes(k))));
  return { add, names: used(names), values: used(values) };
}

/** The submission update: status, override, conditioned on the state read (once per submission). */
function submissionUpdate(tx: Tx, sub: SubmissionItem, status: string, input: OverrideInput, at: string, extra: { set: string[]; values: Record<string, unknown> }) {
  tx.update('submission', keys.submission(sub.id), `SET #s = :ost, #o = :orec, reason_codes = :orc, updated_at = :ot, final_at = :ot, ${extra.set.join(', ')}`, {
    condition: '#s = :oprev AND #r = :oround AND attribute_not_exists(#o)',
    names: { '#s': 'status', '#o': 'override', '#r': 'round' },
    values: {
      ':ost': status,
      ':orec': overrideRecord(input, at),
      ':orc': codesAfter(status, input),
      ':ot': at,
      ':oprev': sub.status,
      ':oround': sub.round,
      ...extra.values,
    },
  });
}

function overriddenEvent(tx: Tx, ctx: MutationContext, sub: SubmissionItem, input: OverrideInput, status: string, amountCents: number) {
  const data = {
    submission_id: sub.id,
    job_id: sub.job_id,
    decision: input.decision,
    previous_status: sub.status,
    status,
    reason_code: input.reason_code ?? null,
    amount_cents: amountCents,
  };
  emit(tx, { orgId: sub.org_id, env: sub.environment, type: 'submission.overridden', jobId: sub.job_id, data });
  audit(tx, {
    orgId: sub.org_id,
    eventType: 'submission.overridden',
    actor: ctx.actor,
    env: sub.environment,
    resource: { type: 'submission', id: sub.id },
    jobId: sub.job_id,
    requestId: ctx.requestId,
    data: { ...data, note: input.note ?? null },
  });
}

/** Approve by override: the D29 approval, plus the override record and event. */
function addOverrideApproval(tx: Tx, ctx: MutationContext, sub: SubmissionItem, job: JobItem, input: OverrideInput, at: string): number {
  const n = sub.uploads.length;
  const stars = Number(sub.ai_star_rating ?? 1);
  const payout = Number(job.worker_payout_per_file_cents) * n;
  const payId = newId('payout');
  const retry = sub.status === 'retry_pending';
  submissionUpdate(tx, sub, 'approved', input, at, {
    set: ['file_ids = :ofids', 'payout_cents = :opay', 'payout_id = :opid', 'reserved_until = :onull'],
    values: { ':ofids': sub.uploads.map((u) => u.file_id), ':opay': payout, ':opid': payId, ':onull': null },
  });
  if (retry) tx.delete('retry_window', keys.retryWindow(sub.id), { condition: 'attribute_exists(PK)' });
  for (const u of sub.uploads) {
    const part = sub.parts?.[u.file_id] ?? {};
    // The File carries its annotations as the normal approval writes them (speech filled in, D65).
    tx.create(`file:${u.file_id}`, fileItem(sub, u, { ...part, annotations: annotationsOf(part) }, Number(part.score?.ai_star_rating ?? stars), at));
  }
  addApprovalIndexes(tx, sub.org_id, sub.environment, sub.uploads.map((u) => approvedRef(sub, u.file_id)), at);
  const cat = sub.category ?? categoryOf(sub.uploads[0]!.content_type);
  // The approval's event before the job's (a job.completed follows from it).
  addPayoutAndApprovedEvent(tx, sub, { payId, payout, files: n, stars, at });
  const { chargedCents } = addApprovalCharges(tx, {
    job,
    submissionId: sub.id,
    files: n,
    pendingReleased: retry ? Number(sub.slots_held ?? n) : 0,
    jobUpdate: summaryShift(cat, sub.status, 'approved', stars),
  });
  overriddenEvent(tx, ctx, sub, input, 'approved', chargedCents);
  return chargedCents;
}

async function addOverrideRejection(tx: Tx, ctx: MutationContext, sub: SubmissionItem, job: JobItem, input: OverrideInput, at: string): Promise<Withdrawal> {
  const cat = sub.category ?? categoryOf(sub.uploads[0]!.content_type);
  const w = await addWithdrawal(tx, sub, job, summaryShift(cat, 'approved', 'rejected', Number(sub.ai_star_rating ?? 1)), at);
  submissionUpdate(tx, sub, 'rejected', input, at, {
    set: ['file_ids = :ofids', 'withdrawn_file_ids = :owids', 'withdrawn_object_keys = :owk', 'payout_cents = :ozero'],
    values: { ':ofids': [], ':owids': w.fileIds, ':owk': w.objectKeys, ':ozero': 0 },
  });
  overriddenEvent(tx, ctx, sub, input, 'rejected', w.reversedCents);
  return w;
}

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
      if (!(e instanceof StaleRead) || attempt >= MAX_ATTEMPTS) throw e;
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
      if (retryable(e) && attempt < MAX_ATTEMPTS) {
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
