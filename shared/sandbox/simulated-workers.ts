/**
 * What the sandbox's simulated workers do (D40, D53): the worker records, the sandbox directive on a
 * submission, an upload of unique sample bytes through the real upload path, and the chain's
 * submissions still in flight.
 */
import { UpdateCommand, paginateQuery } from '@aws-sdk/lib-dynamodb';
import { db, tableName } from '../db/client';
import { batchGetConsistent, keyId } from '../db/batch-get';
import { keys, indexKeys } from '../db/keys';
import { Tx } from '../db/tx';
import { newId } from '../ids';
import { nowIso } from '../clock';
import { logger } from '../logger';
import { ApiError } from '../errors';
import type { JobItem } from '../jobs/model';
import { uploadDirect } from '../work/uploads';
import type { SubmissionItem } from '../work/model';
import type { MutationContext } from '../context';
import type { SandboxDirective } from '../scoring/types';
import { sampleMediaFor, type SampleJob } from './samples';
import { uniqueBytes } from './unique-bytes';
import type { SandboxState } from './chain-state';

/** Simulated workers are test-environment worker records without a token (nobody signs in as them). */
export async function ensureWorkers(state: SandboxState, n: number): Promise<string[]> {
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

export const workerCtx = (workerId: string): MutationContext => ({ actor: { type: 'worker', id: workerId }, requestId: null, idem: null });

export async function setDirective(subId: string, directive: SandboxDirective): Promise<void> {
  await db().send(
    new UpdateCommand({
      TableName: tableName(),
      Key: keys.submission(subId),
      UpdateExpression: 'SET sandbox_directive = :d',
      ExpressionAttributeValues: { ':d': directive },
    }),
  );
}

export async function upload(job: JobItem, sub: SubmissionItem, mode: 'upload' | 'retry', nonce: string): Promise<void> {
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

/** Statuses after which nothing more happens to a submission that the chain would act on. */
const SETTLED: ReadonlySet<string> = new Set(['approved', 'rejected', 'withdrawn', 'expired', 'cancelled']);
const IN_FLIGHT: ReadonlySet<string> = new Set(['pending_score', 'retry_pending']);

/**
 * The chain's submissions still in flight, scoring or waiting for their one retry (D27), and those
 * not yet settled (`open`, kept on the chain's state for the next tick).
 *
 * They are read by id, strongly consistent: the chain keeps the ids of the submissions it made. A
 * Query of the job's submissions would read an index, which takes in a write asynchronously, so a
 * tick just after an upload or a verdict could miss a submission that has just moved into flight
 * and give up, or skip its retry. A chain started before the ids were kept has none yet: its first
 * tick reads them from that index once (`open` then seeds the state).
 */
export async function inFlight(job: JobItem, state: SandboxState): Promise<{ flying: InFlight[]; open: string[] }> {
  if (state.open_submissions === undefined) {
    const flying = await inFlightFromIndex(job, state.workers);
    return { flying, open: flying.map((s) => s.id) };
  }
  const found = await batchGetConsistent(state.open_submissions.map((id) => keys.submission(id)));
  const items = state.open_submissions.map((id) => found.get(keyId(keys.submission(id))) as SubmissionItem | undefined);
  const open = items.filter((s): s is SubmissionItem => !!s && !SETTLED.has(s.status));
  return { flying: open.filter((s) => IN_FLIGHT.has(s.status)), open: open.map((s) => s.id) };
}

/**
 * A chain without kept ids: its workers' submissions in flight from the job's submission index.
 * Every page is read: the filter applies after each 1 MB page is read, and submissions carry their
 * files' annotations, so one page may hold only old, settled ones.
 */
async function inFlightFromIndex(job: JobItem, workers: string[]): Promise<InFlight[]> {
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

/** An upload refused by the real checks counts as an attempt; anything else is a fault. */
export function ignoreRefusal(e: unknown): void {
  if (e instanceof ApiError && e.status < 500) {
    logger.info('sandbox upload refused', { type: e.type, message: e.message });
    return;
  }
  throw e;
}
