/**
 * The writes of an override's transaction (D71): the submission update and override record, the
 * summary counters, the `submission.overridden` event and audit record, and the approval (D29) or
 * the withdrawal (override-withdraw.ts) the decision adds (override.ts).
 */
import { type ReasonCode } from '../scoring/types';
import { keys } from '../db/keys';
import { Tx } from '../db/tx';
import { newId } from '../ids';
import { emit } from '../outbox';
import { audit } from '../audit';
import { type MutationContext } from '../context';
import { categoryOf, type Category, type JobItem } from '../jobs/model';
import { addApprovalCharges } from '../ledger/escrow';
import { fileItem } from '../files';
import { addApprovalIndexes } from '../trust/indexes';
import { approvedRef } from './verdict';
import { annotationsOf } from './verdict-input';
import { addPayoutAndApprovedEvent } from './approval-records';
import { type SubmissionItem } from './model';
import { addWithdrawal, type Withdrawal } from './override-withdraw';
import type { OverrideInput } from './override-rules';

/**
 * The submission's `reason_codes` after the override (D68 codes only): [] when approved; the
 * buyer's code when rejected (none for `other`, which the override record still carries).
 */
export function codesAfter(status: string, input: OverrideInput): ReasonCode[] {
  if (status !== 'rejected' || !input.reason_code || input.reason_code === 'other') return [];
  return [input.reason_code];
}
export const statusAfterOverride = (input: OverrideInput) => (input.decision === 'approve' ? 'approved' : 'rejected');

/** The override record shown on the submission. */
export const overrideRecord = (input: OverrideInput, at: string) => ({
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
export function addOverrideApproval(tx: Tx, ctx: MutationContext, sub: SubmissionItem, job: JobItem, input: OverrideInput, at: string): number {
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

export async function addOverrideRejection(tx: Tx, ctx: MutationContext, sub: SubmissionItem, job: JobItem, input: OverrideInput, at: string): Promise<Withdrawal> {
  const cat = sub.category ?? categoryOf(sub.uploads[0]!.content_type);
  const w = await addWithdrawal(tx, sub, job, summaryShift(cat, 'approved', 'rejected', Number(sub.ai_star_rating ?? 1)), at);
  submissionUpdate(tx, sub, 'rejected', input, at, {
    set: ['file_ids = :ofids', 'withdrawn_file_ids = :owids', 'withdrawn_object_keys = :owk', 'payout_cents = :ozero'],
    values: { ':ofids': [], ':owids': w.fileIds, ':owk': w.objectKeys, ':ozero': 0 },
  });
  overriddenEvent(tx, ctx, sub, input, 'rejected', w.reversedCents);
  return w;
}
