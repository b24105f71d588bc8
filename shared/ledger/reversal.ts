/**
 * Reversal (D31, D71): the money and job part of withdrawing approved files (a buyer's override
 * rejecting an approved submission). The mirror of `addApprovalCharges`:
 *
 * - THE update of the job item for its transaction: files_approved −= files, and for live jobs
 *   escrow_remaining_cents += price × files (the money goes back to the job's escrow, so it can pay
 *   for a new file or be refunded by a cancel); a `completed` job goes back to `in_progress`
 *   (completed_at null) and reappears on the workers' board when it has free slots. Conditioned on
 *   the status and the three counters as read (a concurrent change: `ConditionFailed` label `job`,
 *   re-read and rebuild) and on the job not being cancelled.
 * - Live jobs: one `reversal` row (+price × files, job_id, submission_id) and held_cents += the
 *   same on the balance (active_jobs +1 when the job reopens). `available` does not change. So
 *   held = −Σ(escrow) − Σ(refund) + Σ(deduction) + Σ(reversal) keeps holding. Test jobs (D3):
 *   counters only, no money.
 */
import { keys } from '../db/keys';
import { nowIso } from '../clock';
import { writeLedgerRow } from './lots';
import { availability, freeSlots, jobIndex, type JobItem, type JobStatus } from '../jobs/model';
import type { Tx } from '../db/tx';

export interface ReversalInput {
  /** The job item as read (ConsistentRead) in this attempt. */
  job: JobItem;
  submissionId: string;
  /** Files withdrawn (those the submission had approved). */
  files: number;
  /** Extra clauses merged into the job update. Placeholders must not start with `:r`. */
  jobUpdate?: { set?: string[]; add?: string[]; values?: Record<string, unknown>; names?: Record<string, string> };
}

/** Statuses a job can take a reversal in: every status but cancelled (a cancelled job refunded its escrow). */
export const REVERSIBLE_STATUSES: readonly JobStatus[] = ['open', 'filled', 'in_progress', 'completed'];

export function addReversal(tx: Tx, input: ReversalInput): { reversedCents: number; reopened: boolean; status: JobStatus } {
  const { job, files } = input;
  if (!REVERSIBLE_STATUSES.includes(job.status)) throw new Error('addReversal: the job is cancelled');
  if (files < 1 || files > Number(job.files_approved)) throw new Error('addReversal: more files than the job has approved');
  const live = job.environment === 'live';
  const price = Number(job.price_per_file_cents);
  const amount = live ? price * files : 0;
  const reopened = job.status === 'completed';
  const status: JobStatus = reopened ? 'in_progress' : job.status;
  const at = nowIso();
  const after = { ...job, files_approved: Number(job.files_approved) - files };
  const avail = availability(job, status, freeSlots(after));

  const set = [
    '#s = :rstatus',
    'updated_at = :rt',
    'GSI2PK = :rg2',
    ...(reopened ? ['completed_at = :rnull'] : []),
    ...(avail ? ['GSI3PK = :rg3', 'GSI3SK = :rg3s'] : []),
    ...(input.jobUpdate?.set ?? []),
  ];
  const add = ['files_approved :rfiles', 'escrow_remaining_cents :ramount', ...(input.jobUpdate?.add ?? [])];
  tx.update('job', keys.job(job.id), `SET ${set.join(', ')} ADD ${add.join(', ')}${avail ? '' : ' REMOVE GSI3PK, GSI3SK'}`, {
    condition: '#s = :rread AND files_approved = :rfa AND files_pending = :rfp AND slots_reserved = :rsr',
    names: { '#s': 'status', ...(input.jobUpdate?.names ?? {}) },
    values: {
      ':rstatus': status,
      ':rt': at,
      ':rg2': jobIndex(job, status).GSI2PK,
      ...(reopened ? { ':rnull': null } : {}),
      ...(avail ? { ':rg3': avail.GSI3PK, ':rg3s': avail.GSI3SK } : {}),
      ':rfiles': -files,
      ':ramount': amount,
      ':rread': job.status,
      ':rfa': Number(job.files_approved),
      ':rfp': Number(job.files_pending),
      ':rsr': Number(job.slots_reserved),
      ...(input.jobUpdate?.values ?? {}),
    },
  });

  if (live) {
    writeLedgerRow(tx, job.org_id, job.environment, {
      type: 'reversal',
      amountCents: amount,
      description: `${files} withdrawn file${files > 1 ? 's' : ''} × ${price} cents back to the escrow of job ${job.id}`,
      jobId: job.id,
      submissionId: input.submissionId,
    });
    tx.update('balance', keys.balance(job.org_id, job.environment), `ADD held_cents :rheld${reopened ? ', active_jobs :rone' : ''} SET updated_at = :rt`, {
      values: { ':rheld': amount, ':rt': at, ...(reopened ? { ':rone': 1 } : {}) },
    });
  }
  return { reversedCents: amount, reopened, status };
}
