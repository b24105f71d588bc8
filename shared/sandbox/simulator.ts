/**
 * The sandbox's simulated workers (D40, D53; scenarios in docs/sandbox.md).
 *
 * A test-environment job's `job.created` event reaches the `sandbox` queue after
 * SANDBOX_DELAY_SECONDS (the queue's delivery delay). Each message is one *tick*: the simulator
 * reads the job, lets up to BATCH simulated workers accept it and upload a sample through the
 * same routes' domain functions (accept → upload to S3 → the S3-triggered pipeline → the same
 * verdict and approval transaction as live), retries the `retry_pending` ones, and schedules the
 * next tick as a delayed queue message — no process ever sleeps. The chain ends when the job is
 * completed or cancelled, or after 3 × files_needed submissions (each with its one retry) (D53: a job whose min_star_rating is
 * above the sandbox's 4 stars never completes).
 *
 * Exactly one chain per job: the state item's `seq` must match the tick's, and each tick advances
 * it with a conditional write, so a duplicated message or event does nothing.
 *
 * Nothing ends the chain by accident: a tick that failed is redelivered and runs again (the first
 * one too, when its `job.created` record comes back), and once the next tick is sent the state
 * records it (`tick_sent`). A tick redelivered after it advanced the state, whose successor was
 * never recorded as sent (the function stopped between the two), sends that successor again.
 *
 * The state item is in chain-state.ts, the scenarios in scenarios.ts, and what a simulated worker
 * does in simulated-workers.ts.
 */
import { randomBytes } from 'node:crypto';
import { logger } from '../logger';
import { ApiError } from '../errors';
import { getJobItem } from '../jobs';
import { freeSlots } from '../jobs/model';
import { acceptJob } from '../work/accept-job';
import { getSubmissionItem } from '../work/reservations';
import { withdrawFromJob } from '../work/release-reservation';
import { mixedPlan } from './scenarios';
import { advance, loadState } from './chain-state';
import { ensureWorkers, ignoreRefusal, inFlight, setDirective, upload, workerCtx } from './simulated-workers';

/** Uploads started per tick: large jobs go in batches, never one message per file at once. */
export const BATCH = 5;
/** Seconds between ticks while uploads are being scored; `slow` spreads uploads over minutes. */
export const TICK_SECONDS = { busy: 2, slow: 20 } as const;

export type TickResult = { next: { seq: number; delaySeconds: number } | null; reason: string };

/** One tick of the chain for `jobId` at sequence `seq`. */
export async function tick(jobId: string, seq: number): Promise<TickResult> {
  const state = await loadState(jobId);
  if (!state) return { next: null, reason: 'no sandbox state' };
  if (state.seq !== seq) {
    if (state.seq === seq + 1 && !state.finished && state.tick_sent !== state.seq) {
      return { next: { seq: state.seq, delaySeconds: 0 }, reason: `tick ${state.seq} was never sent: sending it` };
    }
    return { next: null, reason: `stale tick ${seq} (state at ${state.seq})` };
  }
  if (state.finished) return { next: null, reason: `finished: ${state.finished}` };
  const job = await getJobItem(jobId, true);
  if (!job || job.environment !== 'test') return { next: null, reason: 'not a test-environment job' };

  if (job.status === 'completed' || job.status === 'cancelled') {
    await advance(state, { finished: job.status });
    return { next: null, reason: `job ${job.status}` };
  }
  // D53: at most 3 × files_needed submissions; each may use its one retry (D27).
  const maxAttempts = 3 * Number(job.files_needed);
  const { flying, open } = await inFlight(job, state);
  if (state.attempts >= maxAttempts && flying.length === 0) {
    await advance(state, { finished: 'gave_up' });
    logger.info('sandbox: giving up after 3 × files_needed attempts', { job_id: jobId, attempts: state.attempts });
    return { next: null, reason: 'gave up after 3 × files_needed attempts' };
  }

  // Retries first: each retry_pending submission of ours gets one better file.
  for (const f of flying.filter((s) => s.status === 'retry_pending' && Number(s.attempt) === 1)) {
    const sub = await getSubmissionItem(f.id);
    if (!sub || sub.status !== 'retry_pending' || Number(sub.attempt) !== 1) continue;
    await setDirective(sub.id, 'approve');
    await upload(job, sub, 'retry', randomBytes(8).toString('hex')).catch(ignoreRefusal);
  }

  // New submissions: one per idle simulated worker, up to `wanted`.
  const fps = Number(job.files_per_submission ?? 1);
  const free = freeSlots(job);
  // Whole submissions, and one more that takes the slots left when fewer than files_per_submission
  // remain (acceptJob reserves what is left; the upload sends that many files).
  const slots = Math.floor(free / fps) + (free % fps > 0 ? 1 : 0);
  const newUploads = state.scenario === 'slow' ? Math.min(1, slots) : Math.min(BATCH, slots);
  const wanted = Math.min(newUploads, maxAttempts - state.attempts);
  const workers = await ensureWorkers(state, Math.max(wanted, state.workers.length));
  let attempts = state.attempts;
  let firstNonce = state.first_nonce;
  let started = 0;
  const opened: string[] = [];
  for (const workerId of workers) {
    if (started >= wanted) break;
    let view: { id: string };
    try {
      view = await acceptJob(workerCtx(workerId), { kind: 'worker', workerId, env: 'test' }, job.id);
    } catch (e) {
      if (e instanceof ApiError && e.status === 409) continue; // busy worker or no free slot now
      throw e;
    }
    const plan = state.scenario === 'mixed' ? mixedPlan(attempts) : { directive: 'approve' as const, duplicateOfFirst: false };
    let nonce = randomBytes(8).toString('hex');
    if (plan.duplicateOfFirst && firstNonce) nonce = firstNonce;
    firstNonce ??= nonce;
    opened.push(view.id);
    const sub = (await getSubmissionItem(view.id))!;
    await setDirective(sub.id, plan.directive);
    await upload(job, sub, 'upload', nonce).catch(async (e: unknown) => {
      // A simulated worker that could not upload gives its reservation back, as a real one would
      // withdraw: the slots are free for the next tick instead of held for the hour.
      await withdrawFromJob(workerCtx(sub.worker_id), { kind: 'worker', workerId: sub.worker_id, env: 'test' }, job.id).catch(() => undefined);
      ignoreRefusal(e);
    });
    attempts++;
    started++;
  }

  const ok = await advance(state, { attempts, workers, first_nonce: firstNonce, open_submissions: [...open, ...opened] });
  if (!ok) return { next: null, reason: 'another tick advanced the chain' };
  const delaySeconds = state.scenario === 'slow' ? TICK_SECONDS.slow : TICK_SECONDS.busy;
  return { next: { seq: state.seq + 1, delaySeconds }, reason: `uploaded ${started}, attempts ${attempts}` };
}
