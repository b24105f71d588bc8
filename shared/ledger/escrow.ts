/**
 * Escrow (D31, D33): a live job holds `price × files_needed` from the moment it is created.
 *
 * - `addEscrow`: available → held, drawn from the lots that expire first and have not expired yet
 *   (a lot past its expiry is never drawn, even before the sweep empties it), one `escrow` row.
 * - `addApprovalCharges`: the approval transaction's money and job part (D29), `deduction` rows.
 * - `addEscrowRefund`: cancel returns the unused escrow, one `refund` row.
 *
 * A job keeps the list of lots its escrow came from (`escrow_sources`, expiry order, immutable).
 * Approvals consume the escrow in that same order (first to expire is spent first), so the part of
 * each lot still unused is a pure function of the sources and the amount consumed: the refund
 * returns exactly those parts to their lots, and approvals never need to touch the lots.
 */
import { keys } from '../db/keys';
import { nowIso } from '../clock';
import { emit } from '../outbox';
import { audit } from '../audit';
import { ApiError, ConditionFailed, errors } from '../errors';
import { writeLedgerRow, lotKey, creditLot, expiredAt, type Lot } from './lots';
import type { BalanceSnapshot } from './balance';
import { ACTIVE_STATUSES, availability, freeSlots, jobIndex, type EscrowSource, type JobItem, type JobStatus } from '../jobs/model';
import type { Tx } from '../db/tx';
import type { Env } from '../types';

/** Leaves room in the 100-item transaction for the job, rows, event, audit and idempotency record. */
export const MAX_LOTS_PER_ESCROW = 60;

/**
 * Lots to draw `amount` from at `at`, first to expire first, skipping lots already expired then
 * (D33: their credits are gone, whether or not the sweep has written it yet). Null when the others
 * do not hold enough.
 */
export function planDraw(lots: Lot[], amount: number, at: string): { lot: Lot; take: number }[] | null {
  const out: { lot: Lot; take: number }[] = [];
  let left = amount;
  for (const lot of lots) {
    if (left === 0) break;
    if (lot.remaining <= 0 || expiredAt(lot, at)) continue;
    const take = Math.min(lot.remaining, left);
    out.push({ lot, take });
    left -= take;
  }
  return left === 0 ? out : null;
}

/**
 * D19: the 402 with every variant field name (D41: inside `error`). `available` is what can be
 * spent; `expired`, credits of the balance past their expiry that the next sweep removes (D33).
 */
export function insufficientCredits(available: number, required: number, purchaseUrl: string, expired = 0): ApiError {
  const gone = expired > 0 ? ` A further ${expired} cents of the balance have expired; they are removed from it at the next expiry sweep.` : '';
  return new ApiError(402, 'insufficient_credits', `This job needs ${required} cents in escrow; ${available} are available.${gone}`, undefined, {
    current_balance_cents: available,
    required_cents: required,
    shortfall_cents: Math.max(0, required - available),
    purchase_url: purchaseUrl,
    balance_cents: available,
    needed_cents: required,
  });
}

/**
 * Escrow `amount` for a new live job in `tx`, planned at `at` (default now). Each lot drawn is
 * conditioned on still holding what is taken and, for a lot that can expire, on not having expired
 * when the transaction is built (D33: a lot that expires between the read and the commit is not
 * drawn); the balance on `balanceCondition` (which implies available ≥ amount) and, for a
 * free-tier organization, on having no active job (D18); all updates are ADDs, so concurrent
 * escrows commute and no cent is spent twice. A failed condition (label `balance` or `lot:*`)
 * means the snapshot went stale: re-read and run again. Returns the escrow sources for the job.
 */
export function addEscrow(
  tx: Tx,
  input: {
    orgId: string;
    env: Env;
    jobId: string;
    amount: number;
    snapshot: BalanceSnapshot;
    freeTier: boolean;
    /** Condition on the balance (`dropRegime`); it must imply available_cents ≥ amount. */
    balanceCondition: { condition: string; values: Record<string, unknown> };
    /** The time the draw is planned for (the job's creation); default now. */
    at?: string;
  },
): EscrowSource[] {
  const { orgId, env, jobId, amount, snapshot } = input;
  const plan = planDraw(snapshot.lots, amount, input.at ?? nowIso());
  // The balance and its lots are read side by side, not atomically: a creation that committed
  // between the two reads leaves a balance that covers the amount over lots that no longer do.
  // That is a stale snapshot (re-read and run again, or 402 once the balance really is short),
  // never a fault (issue 11.4).
  if (!plan) throw new ConditionFailed(['balance']);
  if (plan.length > MAX_LOTS_PER_ESCROW) {
    throw errors.conflict(`Escrowing this job would draw from more than ${MAX_LOTS_PER_ESCROW} credit lots; create a smaller job.`);
  }
  const now = nowIso();
  for (const { lot, take } of plan) {
    tx.update(`lot:${lot.id}`, lotKey(orgId, env, lot.sk), 'ADD remaining_cents :neg', {
      // D33: never from a lot past its expiry (the perpetual lot has none).
      condition: lot.expiresAt ? 'remaining_cents >= :take AND expires_at > :now' : 'remaining_cents >= :take',
      values: { ':neg': -take, ':take': take, ...(lot.expiresAt ? { ':now': now } : {}) },
    });
  }
  const v = input.balanceCondition;
  const freeTier = input.freeTier ? ' AND (attribute_not_exists(active_jobs) OR active_jobs < :one)' : '';
  tx.update('balance', keys.balance(orgId, env), 'ADD available_cents :neg, held_cents :amt, version :one, active_jobs :one SET updated_at = :t', {
    condition: `${v.condition}${freeTier}`,
    values: { ...v.values, ':neg': -amount, ':amt': amount, ':one': 1, ':t': nowIso() },
  });
  writeLedgerRow(tx, orgId, env, { type: 'escrow', amountCents: -amount, description: `Escrow for job ${jobId}`, jobId });
  return plan.map(({ lot, take }) => ({ lot_id: lot.id, lot_sk: lot.sk, expires_at: lot.expiresAt, cents: take }));
}

/** What is still unused of each escrow source after `consumed` cents were deducted, in source order. */
export function unusedSources(sources: EscrowSource[], consumed: number): { source: EscrowSource; cents: number }[] {
  let toSkip = consumed;
  const out: { source: EscrowSource; cents: number }[] = [];
  for (const s of sources) {
    const used = Math.min(s.cents, toSkip);
    toSkip -= used;
    if (s.cents - used > 0) out.push({ source: s, cents: s.cents - used });
  }
  return out;
}

/**
 * Cancel's money part: the unused escrow (`escrow_remaining_cents` = price × (files_needed −
 * files_approved)) goes back to the lots it came from, with one `refund` row, and `active_jobs`
 * drops (D18). The caller's job update must be conditioned on the `escrow_remaining_cents` it
 * read, so the refund is exact and happens once. Returns the refund (0 for test jobs, D3).
 */
export function addEscrowRefund(tx: Tx, job: JobItem): number {
  if (job.environment !== 'live') return 0;
  const refund = Number(job.escrow_remaining_cents ?? 0);
  const sources = job.escrow_sources ?? [];
  const total = sources.reduce((s, x) => s + x.cents, 0);
  for (const { source, cents } of unusedSources(sources, total - refund)) {
    creditLot(tx, job.org_id, job.environment, { sk: source.lot_sk, id: source.lot_id, expiresAt: source.expires_at }, cents);
  }
  tx.update('balance', keys.balance(job.org_id, job.environment), 'ADD available_cents :r, held_cents :neg, version :one, active_jobs :minus SET updated_at = :t', {
    values: { ':r': refund, ':neg': -refund, ':one': 1, ':minus': -1, ':t': nowIso() },
  });
  if (refund > 0) {
    writeLedgerRow(tx, job.org_id, job.environment, {
      type: 'refund',
      amountCents: refund,
      description: `Refund of unused escrow for job ${job.id}`,
      jobId: job.id,
    });
  }
  return refund;
}

export interface ApprovalChargeInput {
  /** The job item as read (ConsistentRead) in this approval attempt. */
  job: JobItem;
  submissionId: string;
  /** Files approved by this submission (1..files_per_submission). */
  files: number;
  /** How much `files_pending` this verdict releases (normally `files`). Default `files`. */
  pendingReleased?: number;
  /**
   * Extra clauses merged into the one UpdateItem this function writes on the job item (DynamoDB
   * allows one operation per item per transaction), e.g. the summary counters of
   * `summaryClauses` (shared/jobs/summary.ts). Placeholders must not start with `:a`, `:g`, `:n`.
   */
  jobUpdate?: { set?: string[]; add?: string[]; values?: Record<string, unknown>; names?: Record<string, string> };
}

/** D29: an approval is allowed only on an active job and never beyond files_needed. */
export function approvalAllowed(job: Pick<JobItem, 'status' | 'files_approved' | 'files_needed'>, files: number): boolean {
  return ACTIVE_STATUSES.includes(job.status) && files >= 1 && Number(job.files_approved) + files <= Number(job.files_needed);
}

/**
 * The approval transaction's money and job part (D29). CONTRACT for the pipeline:
 *
 * - Call it while building the approval Tx, with the job item read consistently in this attempt,
 *   after `approvalAllowed(job, files)` returned true (otherwise reject the submission: no charge).
 * - It writes THE update of the job item (add no other operation on the job item to the same Tx;
 *   pass extra clauses in `jobUpdate`): files_approved += files, files_pending −= pendingReleased,
 *   escrow_remaining_cents −= price × files, status → in_progress, or → completed with
 *   completed_at when files_needed is reached (then the available-jobs index entry is removed and
 *   `job.completed` + its audit record are added to the same Tx).
 * - Live jobs: one `deduction` row (−price × files, job_id, submission_id) and held_cents −=
 *   price × files (and active_jobs −1 on completion) on the balance; `available` is untouched (the
 *   money was escrowed at creation). Test jobs (D3): counters only, no money.
 * - The job update is conditioned on status ∈ {open, filled, in_progress} and on files_approved,
 *   files_pending and slots_reserved still being the values read (status and board visibility are
 *   computed from them). Except the common case, which needs no snapshot: an in_progress job that
 *   this approval does not complete, with pendingReleased = files (free slots unchanged), is
 *   conditioned only on staying in_progress and below files_needed. `ConditionFailed` with label
 *   `job` on commit: re-read the job and build the Tx again (then `approvalAllowed` decides
 *   between approving and rejecting).
 */
export function addApprovalCharges(tx: Tx, input: ApprovalChargeInput): { chargedCents: number; completed: boolean; status: JobStatus } {
  const { job, files } = input;
  if (!approvalAllowed(job, files)) throw new Error('addApprovalCharges: not allowed in this job state; check approvalAllowed first');
  const pendingReleased = input.pendingReleased ?? files;
  const live = job.environment === 'live';
  const price = Number(job.price_per_file_cents);
  const charge = live ? price * files : 0;
  const approvedAfter = Number(job.files_approved) + files;
  const completed = approvedAfter === Number(job.files_needed);
  const status: JobStatus = completed ? 'completed' : 'in_progress';
  const at = nowIso();
  const after = { ...job, files_approved: approvedAfter, files_pending: Number(job.files_pending) - pendingReleased };
  const avail = availability(job, status, freeSlots(after));

  const set = [
    '#s = :nstatus',
    'updated_at = :nt',
    'GSI2PK = :g2',
    ...(completed ? ['completed_at = :nt'] : []),
    ...(avail ? ['GSI3PK = :g3', 'GSI3SK = :g3s'] : []),
    ...(input.jobUpdate?.set ?? []),
  ];
  const add = ['files_approved :nfiles', 'files_pending :npending', 'escrow_remaining_cents :ncharge', ...(input.jobUpdate?.add ?? [])];
  if (job.status === 'in_progress' && !completed && pendingReleased === files) {
    // The common approval: the job stays in_progress and its free slots do not move (pending →
    // approved), so neither the status nor the board index changes and no snapshot of the other
    // counters is needed. Conditioned on staying below files_needed after the addition, so the
    // completing approval (and any over-approval) fails here and is rebuilt on a fresh read.
    // Concurrent approvals then no longer cancel each other.
    tx.update('job', keys.job(job.id), `SET ${['updated_at = :nt', ...(input.jobUpdate?.set ?? [])].join(', ')} ADD ${add.join(', ')}`, {
      condition: '#s = :ainprog AND files_approved <= :amaxbefore',
      names: { '#s': 'status', ...(input.jobUpdate?.names ?? {}) },
      values: {
        ':nt': at,
        ':nfiles': files,
        ':npending': -pendingReleased,
        ':ncharge': -charge,
        ':ainprog': 'in_progress',
        ':amaxbefore': Number(job.files_needed) - files - 1,
        ...(input.jobUpdate?.values ?? {}),
      },
    });
  } else tx.update('job', keys.job(job.id), `SET ${set.join(', ')} ADD ${add.join(', ')}${avail ? '' : ' REMOVE GSI3PK, GSI3SK'}`, {
    // The counters as read: the new status and the board visibility (D23) are computed from them.
    condition: '#s IN (:a1, :a2, :a3) AND files_approved = :afa AND files_pending = :afp AND slots_reserved = :asr',
    names: { '#s': 'status', ...(input.jobUpdate?.names ?? {}) },
    values: {
      ':nstatus': status,
      ':nt': at,
      ':g2': jobIndex(job, status).GSI2PK,
      ...(avail ? { ':g3': avail.GSI3PK, ':g3s': avail.GSI3SK } : {}),
      ':nfiles': files,
      ':npending': -pendingReleased,
      ':ncharge': -charge,
      ':a1': ACTIVE_STATUSES[0],
      ':a2': ACTIVE_STATUSES[1],
      ':a3': ACTIVE_STATUSES[2],
      ':afa': Number(job.files_approved),
      ':afp': Number(job.files_pending),
      ':asr': Number(job.slots_reserved),
      ...(input.jobUpdate?.values ?? {}),
    },
  });

  if (live) {
    writeLedgerRow(tx, job.org_id, job.environment, {
      type: 'deduction',
      amountCents: -charge,
      description: `${files} approved file${files > 1 ? 's' : ''} × ${price} cents`,
      jobId: job.id,
      submissionId: input.submissionId,
    });
    tx.update('balance', keys.balance(job.org_id, job.environment), `ADD held_cents :neg${completed ? ', active_jobs :minus' : ''} SET updated_at = :t`, {
      values: { ':neg': -charge, ':t': at, ...(completed ? { ':minus': -1 } : {}) },
    });
  }
  if (completed) {
    emit(tx, {
      orgId: job.org_id,
      env: job.environment,
      type: 'job.completed',
      jobId: job.id,
      data: {
        job_id: job.id,
        files_approved: approvedAfter,
        files_needed: Number(job.files_needed),
        total_worker_payout_cents: Number(job.worker_payout_per_file_cents) * approvedAfter,
      },
    });
    audit(tx, {
      orgId: job.org_id,
      eventType: 'job.completed',
      actor: { type: 'system', id: 'pipeline' },
      env: job.environment,
      resource: { type: 'job', id: job.id },
      jobId: job.id,
      requestId: null,
      data: { files_approved: approvedAfter },
    });
  }
  return { chargedCents: charge, completed, status };
}
