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
 */
import { GetCommand, PutCommand, UpdateCommand, paginateQuery } from '@aws-sdk/lib-dynamodb';
import { ConditionalCheckFailedException } from '@aws-sdk/client-dynamodb';
import { randomBytes } from 'node:crypto';
import { db, tableName } from '../db/client';
import { keys, indexKeys } from '../db/keys';
import { Tx } from '../db/tx';
import { newId } from '../ids';
import { nowIso } from '../clock';
import { logger } from '../logger';
import { ApiError } from '../errors';
import { getJobItem } from '../jobs';
import { freeSlots, type JobItem } from '../jobs/model';
import { acceptJob } from '../work/accept-job';
import { getSubmissionItem } from '../work/reservations';
import { withdrawFromJob } from '../work/release-reservation';
import { uploadDirect } from '../work/uploads';
import type { SubmissionItem } from '../work/model';
import type { MutationContext } from '../context';
import type { SandboxDirective } from '../scoring/types';
import { sampleMediaFor, type SampleJob } from './samples';
import { uniqueBytes } from './unique-bytes';

export const SCENARIOS = ['approve_all', 'mixed', 'slow'] as const;
export type Scenario = (typeof SCENARIOS)[number];

/** Uploads started per tick: large jobs go in batches, never one message per file at once. */
export const BATCH = 5;
/** Seconds between ticks while uploads are being scored; `slow` spreads uploads over minutes. */
export const TICK_SECONDS = { busy: 2, slow: 20 } as const;

interface SandboxState {
  job_id: string;
  scenario: Scenario;
  seq: number;
  attempts: number;
  workers: string[];
  /** Nonce of the first upload, reused once by `mixed` to produce a duplicate (D26). */
  first_nonce: string | null;
  finished: string | null;
  /** The last `seq` whose tick message was sent. */
  tick_sent?: number;
}

export type TickResult = { next: { seq: number; delaySeconds: number } | null; reason: string };

export function scenarioOf(job: Record<string, unknown>): Scenario {
  const s = (job.metadata as Record<string, unknown> | null | undefined)?.sandbox_scenario;
  return typeof s === 'string' && (SCENARIOS as readonly string[]).includes(s) ? (s as Scenario) : 'approve_all';
}

/**
 * `mixed`, by upload index, in every run of ten uploads: the 2nd scores 2 stars (→ retry_pending,
 * then retried once with a 4-star file), the 3rd scores 1 star (rejected), the 4th repeats the
 * first upload's bytes (rejected as a duplicate by the real D26 check); the others score 4.
 */
export function mixedPlan(index: number): { directive: SandboxDirective; duplicateOfFirst: boolean } {
  switch (index % 10) {
    case 1:
      return { directive: 'retry', duplicateOfFirst: false };
    case 2:
      return { directive: 'reject', duplicateOfFirst: false };
    case 3:
      return { directive: 'approve', duplicateOfFirst: true };
    default:
      return { directive: 'approve', duplicateOfFirst: false };
  }
}

async function loadState(jobId: string): Promise<SandboxState | undefined> {
  const out = await db().send(new GetCommand({ TableName: tableName(), Key: keys.sandboxState(jobId), ConsistentRead: true }));
  return out.Item as SandboxState | undefined;
}

/** Start the chain for a job; false when it already started (a duplicated event). */
export async function startChain(job: JobItem): Promise<boolean> {
  try {
    await db().send(
      new PutCommand({
        TableName: tableName(),
        Item: {
          ...keys.sandboxState(job.id),
          entity: 'sandbox_state',
          job_id: job.id,
          scenario: scenarioOf(job),
          seq: 0,
          attempts: 0,
          workers: [],
          first_nonce: null,
          finished: null,
          created_at: nowIso(),
        },
        ConditionExpression: 'attribute_not_exists(PK)',
      }),
    );
    return true;
  } catch (e) {
    if (e instanceof ConditionalCheckFailedException) return false;
    throw e;
  }
}

async function advance(state: SandboxState, patch: Partial<SandboxState>): Promise<boolean> {
  const names: Record<string, string> = { '#seq': 'seq' };
  const values: Record<string, unknown> = { ':seq': state.seq, ':next': state.seq + 1 };
  const sets = ['#seq = :next'];
  for (const [k, v] of Object.entries(patch)) {
    names[`#${k}`] = k;
    values[`:${k}`] = v;
    sets.push(`#${k} = :${k}`);
  }
  try {
    await db().send(
      new UpdateCommand({
        TableName: tableName(),
        Key: keys.sandboxState(state.job_id),
        UpdateExpression: `SET ${sets.join(', ')}`,
        ConditionExpression: '#seq = :seq',
        ExpressionAttributeNames: names,
        ExpressionAttributeValues: values,
      }),
    );
    return true;
  } catch (e) {
    if (e instanceof ConditionalCheckFailedException) return false;
    throw e;
  }
}

/** Simulated workers are test-environment worker records without a token (nobody signs in as them). */
async function ensureWorkers(state: SandboxState, n: number): Promise<string[]> {
  const workers = [...state.workers];
  if (workers.length >= n) return workers;
  const tx = new Tx();
  while (workers.length < n) {
    const id = newId('worker');
    tx.create(`worker:${workers.length}`, {
      ...keys.worker(id),
      entity: 'worker',
      id,
      name: `Sandbox worker ${workers.length + 1}`,
      email: null,
      environment: 'test',
      simulated: true,
      created_at: nowIso(),
    });
    workers.push(id);
  }
  await tx.commit();
  return workers;
}

const workerCtx = (workerId: string): MutationContext => ({ actor: { type: 'worker', id: workerId }, requestId: null, idem: null });

async function setDirective(subId: string, directive: SandboxDirective): Promise<void> {
  await db().send(
    new UpdateCommand({
      TableName: tableName(),
      Key: keys.submission(subId),
      UpdateExpression: 'SET sandbox_directive = :d',
      ExpressionAttributeValues: { ':d': directive },
    }),
  );
}

async function upload(job: JobItem, sub: SubmissionItem, mode: 'upload' | 'retry', nonce: string): Promise<void> {
  // D40: a sample that passes the job's pre-checks (D26), derived from a shipped one when none does.
  const { sample, bytes } = await sampleMediaFor(job as JobItem & SampleJob);
  const count = mode === 'retry' ? Number(sub.slots_held ?? sub.files_expected ?? 1) : Number(sub.files_expected ?? 1);
  const files = await Promise.all(
    Array.from({ length: count }, async (_, i) => ({
      filename: `sandbox-${nonce}-${i}.${sample.file.split('.').pop()}`,
      contentType: sample.content_type,
      data: await uniqueBytes(sample.content_type, bytes, `${nonce}-${i}`),
    })),
  );
  await uploadDirect(workerCtx(sub.worker_id), sub, mode, files, { device_model: 'Sandbox Simulator', app_version: 'sandbox/1' });
}

/** What the chain reads of a submission in flight (the retry reads the whole item again). */
type InFlight = Pick<SubmissionItem, 'id' | 'status' | 'attempt' | 'worker_id'>;

/**
 * Our workers' submissions still in flight: scoring, or waiting for their one retry (D27). Every
 * page of the job's submissions is read: the filter applies after each 1 MB page is read, and
 * submissions carry their files' annotations, so one page may hold only old, settled ones.
 */
async function inFlight(job: JobItem, workers: string[]): Promise<InFlight[]> {
  const ix = indexKeys.jobSubmissions(job.id);
  const found: InFlight[] = [];
  const pages = paginateQuery(
    { client: db() },
    {
      TableName: tableName(),
      IndexName: ix.index,
      KeyConditionExpression: '#pk = :pk',
      FilterExpression: '#s IN (:rp, :ps)',
      ProjectionExpression: 'id, #s, attempt, worker_id',
      ExpressionAttributeNames: { '#pk': 'GSI1PK', '#s': 'status' },
      ExpressionAttributeValues: { ':pk': ix.pk, ':rp': 'retry_pending', ':ps': 'pending_score' },
    },
  );
  for await (const page of pages) found.push(...((page.Items ?? []) as InFlight[]));
  return found.filter((s) => workers.includes(s.worker_id));
}

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
  const flying = await inFlight(job, state.workers);
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

  const ok = await advance(state, { attempts, workers, first_nonce: firstNonce });
  if (!ok) return { next: null, reason: 'another tick advanced the chain' };
  const delaySeconds = state.scenario === 'slow' ? TICK_SECONDS.slow : TICK_SECONDS.busy;
  return { next: { seq: state.seq + 1, delaySeconds }, reason: `uploaded ${started}, attempts ${attempts}` };
}

/** Records that the tick of `seq` was sent (a redelivered predecessor then sends nothing). */
export async function markTickSent(jobId: string, seq: number): Promise<void> {
  try {
    await db().send(
      new UpdateCommand({
        TableName: tableName(),
        Key: keys.sandboxState(jobId),
        UpdateExpression: 'SET tick_sent = :seq',
        ConditionExpression: '#seq = :seq',
        ExpressionAttributeNames: { '#seq': 'seq' },
        ExpressionAttributeValues: { ':seq': seq },
      }),
    );
  } catch (e) {
    if (!(e instanceof ConditionalCheckFailedException)) throw e; // the chain moved on already
  }
}

/** An upload refused by the real checks counts as an attempt; anything else is a fault. */
function ignoreRefusal(e: unknown): void {
  if (e instanceof ApiError && e.status < 500) {
    logger.info('sandbox upload refused', { type: e.type, message: e.message });
    return;
  }
  throw e;
}
