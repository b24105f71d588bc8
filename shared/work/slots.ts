/**
 * Slot accounting on the job item (D23), exact under concurrency.
 *
 * free = files_needed − files_approved − files_pending − slots_reserved. Every change of the slot
 * counters goes through `addSlotChange`, which writes THE update of the job item for its
 * transaction, computed from a consistent snapshot and conditioned on that snapshot (status and
 * the three counters). A concurrent change makes the condition fail (label `job`): the caller
 * re-reads the job and rebuilds its transaction (`withJobRetry`). So a reservation can never take
 * a slot that is not free, and the status / available-jobs index always match the counters:
 * open ↔ filled as free slots reach 0 or come back; in_progress stays in_progress (hidden from
 * workers while full); completed / cancelled never change here.
 */
import { keys } from '../db/keys';
import { nowIso } from '../clock';
import { ConditionFailed, Contention } from '../errors';
import { availability, freeSlots, jobIndex, type JobItem, type JobStatus } from '../jobs/model';
import { getJobItem } from '../jobs';
import { Tx, isContention } from '../db/tx';
import { mayRebuildAfterContention, mayRebuildStale } from '../db/conflicts';

export interface SlotChange {
  /** Δ slots_reserved */
  reserved?: number;
  /** Δ files_pending */
  pending?: number;
  /** Extra clauses merged into the job update (e.g. `summaryClauses`). Placeholders must not start with `:w` / `#w`. */
  extra?: { set?: string[]; add?: string[]; values?: Record<string, unknown>; names?: Record<string, string> };
}

/** The status a job moves to when its free slots become `free` (D23 and the spec's job table). */
export function statusAfter(status: JobStatus, free: number): JobStatus {
  if (status === 'open' && free <= 0) return 'filled';
  if (status === 'filled' && free > 0) return 'open';
  return status;
}

/** Add the job update for `change` to `tx`, conditioned on the snapshot `job`. Returns the new status and free slots. */
export function addSlotChange(tx: Tx, job: JobItem, change: SlotChange): { status: JobStatus; free: number } {
  const reserved = change.reserved ?? 0;
  const pending = change.pending ?? 0;
  const after = {
    ...job,
    slots_reserved: Number(job.slots_reserved ?? 0) + reserved,
    files_pending: Number(job.files_pending ?? 0) + pending,
  };
  const free = freeSlots(after);
  const status = statusAfter(job.status, free);
  const avail = availability(job, status, free);
  const set = ['#ws = :wstatus', 'updated_at = :wt', 'GSI2PK = :wg2', ...(avail ? ['GSI3PK = :wg3', 'GSI3SK = :wg3s'] : []), ...(change.extra?.set ?? [])];
  const add = [
    ...(reserved ? ['slots_reserved :wdr'] : []),
    ...(pending ? ['files_pending :wdp'] : []),
    ...(change.extra?.add ?? []),
  ];
  const expr = `SET ${set.join(', ')}${add.length ? ` ADD ${add.join(', ')}` : ''}${avail ? '' : ' REMOVE GSI3PK, GSI3SK'}`;
  tx.update('job', keys.job(job.id), expr, {
    condition: '#ws = :wcs AND files_approved = :wfa AND files_pending = :wfp AND slots_reserved = :wsr',
    names: { '#ws': 'status', ...(change.extra?.names ?? {}) },
    values: {
      ':wstatus': status,
      ':wt': nowIso(),
      ':wg2': jobIndex(job, status).GSI2PK,
      ...(avail ? { ':wg3': avail.GSI3PK, ':wg3s': avail.GSI3SK } : {}),
      ...(reserved ? { ':wdr': reserved } : {}),
      ...(pending ? { ':wdp': pending } : {}),
      ':wcs': job.status,
      ':wfa': Number(job.files_approved ?? 0),
      ':wfp': Number(job.files_pending ?? 0),
      ':wsr': Number(job.slots_reserved ?? 0),
      ...(change.extra?.values ?? {}),
    },
  });
  return { status, free };
}

/**
 * A move between the slot counters that leaves the free slots unchanged (Δ reserved = −Δ pending,
 * e.g. an upload completing: its reserved slots become pending). Free slots decide the status and
 * the board index, and every other writer keeps those in line with the counters, so neither
 * changes and no snapshot is needed: the update only adds, and a concurrent change of the job
 * does not cancel it (while the writers that do read a snapshot see their condition fail and read
 * again). Returns false, adding nothing, when the move would change the free slots.
 */
export function addFreeNeutralMove(tx: Tx, jobId: string, change: SlotChange): boolean {
  const reserved = change.reserved ?? 0;
  const pending = change.pending ?? 0;
  if (reserved + pending !== 0 || change.extra?.set?.length) return false;
  const add = [...(reserved ? ['slots_reserved :wdr', 'files_pending :wdp'] : []), ...(change.extra?.add ?? [])];
  tx.update('job', keys.job(jobId), `SET updated_at = :wt${add.length ? ` ADD ${add.join(', ')}` : ''}`, {
    condition: 'attribute_exists(PK)',
    names: change.extra?.names,
    values: { ':wt': nowIso(), ...(reserved ? { ':wdr': reserved, ':wdp': pending } : {}), ...(change.extra?.values ?? {}) },
  });
  return true;
}

const backoff = (attempt: number) => new Promise((r) => setTimeout(r, Math.random() * Math.min(250, 8 * 2 ** attempt)));

/**
 * Optimistic concurrency on the job item: `build` runs on a fresh consistent read until its Tx
 * commits. `first`: a consistent snapshot the caller already holds, used for the first attempt
 * (a stale one fails the job condition and the next attempt reads afresh). `since`: when the
 * request's first round began (Date.now()), given by a caller whose rounds contain this one, so the
 * rebuild budgets count from the request's start rather than restart with every nested call.
 */
export async function withJobRetry<T>(jobId: string, build: (job: JobItem, attempt: number) => Promise<T>, maxAttempts = 40, first?: JobItem, since = Date.now()): Promise<T> {
  for (let attempt = 0; ; attempt++) {
    const job = attempt === 0 && first ? first : await getJobItem(jobId, true);
    if (!job) throw new Error(`job ${jobId} vanished`);
    try {
      return await build(job, attempt);
    } catch (e) {
      // A failed condition on the job (our snapshot is stale) or a transaction conflict that
      // outlasted Tx.commit's own retries: re-read and rebuild (contention only within the
      // rebuild budget, a stale snapshot within the stale budget, so a request answers 409 before
      // its time-out).
      const stale = e instanceof ConditionFailed && e.reasons.includes('job');
      const conflict = isContention(e) && mayRebuildAfterContention(since);
      if (((stale && mayRebuildStale(since)) || conflict) && attempt < maxAttempts) {
        await backoff(attempt);
        continue;
      }
      // A job that kept changing under every round we may spend is contention (409 with
      // Retry-After; a consumer's message is delivered again), never a failed condition a caller
      // would read as its own outcome (e.g. an upload completion's "the reservation ended").
      if (stale) throw new Contention(attempt + 1);
      throw e;
    }
  }
}

/**
 * `fn` (a commit that needs no job snapshot) again after a backoff while its transaction's
 * conflicts outlast Tx.commit's own retries, as `withJobRetry` does for a commit built on one.
 * Conditions do not fail between such commits, but on DynamoDB their transactions on the job item
 * still cancel each other (TransactionConflict) while one is in progress.
 */
export async function retryContended<T>(fn: () => Promise<T>, maxAttempts = 40): Promise<T> {
  const since = Date.now();
  for (let attempt = 0; ; attempt++) {
    try {
      return await fn();
    } catch (e) {
      if (!isContention(e) || attempt >= maxAttempts || !mayRebuildAfterContention(since)) throw e;
      await backoff(attempt);
    }
  }
}

/**
 * Puts the available-jobs index entry and the open/filled status back in line with the counters,
 * conditioned on the counters read. A no-op when already consistent. The pipeline's approval no
 * longer runs it: the ledger's approval update is conditioned on the status and all three counters
 * of its snapshot, so the index it writes is exact (shared/ledger/escrow.ts `addApprovalCharges`).
 */
export async function reconcileAvailability(jobId: string): Promise<void> {
  for (let attempt = 0; attempt < 10; attempt++) {
    const job = await getJobItem(jobId, true);
    if (!job) return;
    const free = freeSlots(job);
    const status = statusAfter(job.status, free);
    const want = availability(job, status, free);
    const indexed = typeof job.GSI3PK === 'string';
    if (status === job.status && !!want === indexed && (!want || job.GSI3SK === want.GSI3SK)) return;
    const tx = new Tx();
    addSlotChange(tx, job, {});
    try {
      await tx.commit();
      return;
    } catch (e) {
      if (!(e instanceof ConditionFailed)) throw e;
      await backoff(attempt);
    }
  }
}
