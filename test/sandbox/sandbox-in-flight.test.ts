/**
 * The simulator finds its submissions in flight (D27, D53). It keeps the ids of the submissions it
 * made and reads them by id, so a submission that has just moved into flight counts at once, before
 * the job's submission index has taken the change in (DynamoDB's indexes lag the table).
 *
 * A chain started before the ids were kept reads its submissions in flight from that index once,
 * among all of a job's submissions, not only among the first page DynamoDB answers: submissions
 * carry their files' annotations, so on a job with a few hundred of them the first 1 MB page holds
 * only old, settled ones.
 *
 * The `sandbox` queue is not polled here: each test runs one tick itself, after putting a
 * megabyte and more of older, settled submissions in front of the one in flight.
 *
 * DynamoDB reads at most 1 MB per Query call *before* it applies the FilterExpression; DynamoDB
 * Local applies the megabyte to what is left after the filter. So these tests make a filtered
 * query of a job's submissions evaluate what 1 MB holds of the items put here (`Limit`, which
 * DynamoDB Local, like DynamoDB, counts before the filter), as DynamoDB would.
 */
import { GetCommand, PutCommand, UpdateCommand } from '@aws-sdk/lib-dynamodb';
import { randomBytes } from 'node:crypto';
import { startTestRuntime, waitFor, type TestRuntime, indexesCaughtUp } from '../support/harness';
import { signupBuyer, idemKey } from '../support/buyers';
import { QUEUES } from '../../shared/manifest/wiring';
import { db, dynamo, tableName } from '../../shared/db/client';
import { gsi, keys } from '../../shared/db/keys';
import { newId, ulidFloor } from '../../shared/ids';
import { nowIso } from '../../shared/clock';
import { getJobItem } from '../../shared/jobs';
import { acceptJob } from '../../shared/work/accept-job';
import { getSubmissionItem } from '../../shared/work/reservations';
import { uploadDirect } from '../../shared/work/uploads';
import type { MutationContext } from '../../shared/context';
import { tick } from '../../shared/sandbox/simulator';
import { startChain } from '../../shared/sandbox/chain-state';
import { sampleBytes, sampleFor } from '../../shared/sandbox/samples';
import { uniqueBytes } from '../../shared/sandbox/unique-bytes';
import { emulateIndexLag } from '../../local/index-lag';

/** Settled submissions put in front: 120 × 20 KB of annotations, well over one 1 MB page. */
const OLDER = 120;
const ANNOTATIONS_BYTES = 20_000;
/** What one 1 MB page of DynamoDB holds of those items. */
const ITEMS_PER_PAGE = Math.floor(1_048_576 / (ANNOTATIONS_BYTES + 500));
const PAGE_RULE = 'dynamodb-1mb-page-before-filter';

let rt: TestRuntime;
beforeAll(async () => {
  process.env.SANDBOX_DELAY_SECONDS = '0';
  rt = await startTestRuntime({ onlyQueues: QUEUES.map((q) => q.name).filter((n) => n !== 'sandbox') });
  dynamo().middlewareStack.add(
    (next, context) => async (args) => {
      const input = args.input as { FilterExpression?: string; Limit?: number; ExpressionAttributeValues?: Record<string, unknown> };
      const pk = input.ExpressionAttributeValues?.[':pk'];
      const pkValue = typeof pk === 'object' && pk !== null ? (pk as { S?: string }).S : pk;
      const jobSubmissions = typeof pkValue === 'string' && /^JOB#.*#SUBS$/.test(pkValue);
      if ((context as { commandName?: string }).commandName === 'QueryCommand' && input.FilterExpression && jobSubmissions) {
        input.Limit = Math.min(input.Limit ?? Infinity, ITEMS_PER_PAGE);
      }
      return next(args);
    },
    { step: 'initialize', name: PAGE_RULE },
  );
});
afterAll(async () => {
  dynamo().middlewareStack.remove(PAGE_RULE);
  await rt?.stop();
  delete process.env.SANDBOX_DELAY_SECONDS;
});

/** A test job of one file with its chain started and one simulated worker; nothing uploaded yet. */
async function testJob(): Promise<{ jobId: string; orgId: string; workerId: string }> {
  const buyer = await signupBuyer(rt, 'Sandbox In Flight');
  const r = await rt.request('POST', '/v1/jobs', {
    key: buyer.test,
    headers: { 'Idempotency-Key': idemKey() },
    body: { type: 'data_collection', title: 'In flight', description: 'Photos of shapes for a sandbox in-flight test', files_needed: 1, accepted_formats: ['image/jpeg'], price_per_file_cents: 25 },
  });
  expect(r.status).toBe(201);
  const job = (await getJobItem(r.json.id, true))!;
  expect(await startChain(job)).toBe(true);
  const workerId = newId('worker');
  await db().send(new PutCommand({
    TableName: tableName(),
    Item: { ...keys.worker(workerId), entity: 'worker', id: workerId, name: 'Sandbox worker 1', email: null, environment: 'test', simulated: true, created_at: nowIso() },
  }));
  return { jobId: job.id, orgId: job.org_id, workerId };
}

/**
 * The chain's state as if its simulated worker `workerId` had made `attempts` submissions: with
 * their ids kept (`open`), or as a chain started before the ids were kept (none).
 */
async function chainMade(jobId: string, workerId: string, attempts: number, open?: string[]): Promise<void> {
  await db().send(new UpdateCommand({
    TableName: tableName(),
    Key: keys.sandboxState(jobId),
    UpdateExpression: open ? 'SET attempts = :a, workers = :w, open_submissions = :o' : 'SET attempts = :a, workers = :w REMOVE open_submissions',
    ExpressionAttributeValues: { ':a': attempts, ':w': [workerId], ...(open ? { ':o': open } : {}) },
  }));
}

/** `OLDER` approved submissions of the job whose ids sort before every submission made today. */
async function putOlderSettledSubmissions(jobId: string, orgId: string, workerId: string): Promise<void> {
  const floor = ulidFloor('submission', new Date(Date.now() - 24 * 3600_000)).slice(0, -4);
  const annotations = { type: 'image', note: 'x'.repeat(ANNOTATIONS_BYTES) };
  for (let i = 0; i < OLDER; i += 20) {
    await Promise.all(
      Array.from({ length: Math.min(20, OLDER - i) }, (_, j) => {
        const id = `${floor}${String(i + j).padStart(4, '0')}`;
        return db().send(new PutCommand({
          TableName: tableName(),
          Item: { ...keys.submission(id), GSI1PK: gsi.submission(orgId, 'test', jobId, workerId, id).GSI1PK, GSI1SK: id, entity: 'submission', id, job_id: jobId, org_id: orgId, environment: 'test', worker_id: workerId, status: 'approved', attempt: 1, annotations, created_at: nowIso() },
        }));
      }),
    );
  }
}

const workerCtx = (workerId: string): MutationContext => ({ actor: { type: 'worker', id: workerId }, requestId: null, idem: null });
const state = async (jobId: string) => (await db().send(new GetCommand({ TableName: tableName(), Key: keys.sandboxState(jobId), ConsistentRead: true }))).Item!;

/** The submission once approved (its retry scored). */
const approved = (subId: string) =>
  waitFor(async () => {
    const s = (await getSubmissionItem(subId))!;
    return s.status === 'approved' ? s : null;
  }, { timeoutMs: 30_000, intervalMs: 250 });

/** One submission of the simulated worker, uploaded with a sandbox directive for its score (as the chain does). */
async function simulatedUpload(jobId: string, workerId: string, directive: 'retry' | 'reject'): Promise<{ id: string }> {
  const view = await acceptJob(workerCtx(workerId), { kind: 'worker', workerId, env: 'test' }, jobId);
  await db().send(new UpdateCommand({ TableName: tableName(), Key: keys.submission(view.id), UpdateExpression: 'SET sandbox_directive = :d', ExpressionAttributeValues: { ':d': directive } }));
  const sample = sampleFor({ accepted_formats: ['image/jpeg'] });
  const data = await uniqueBytes(sample.content_type, sampleBytes(sample), randomBytes(8).toString('hex'));
  await uploadDirect(workerCtx(workerId), (await getSubmissionItem(view.id))!, 'upload', [{ filename: 'sandbox.jpg', contentType: sample.content_type, data }], { device_model: 'Sandbox Simulator', app_version: 'sandbox/1' });
  return view;
}

test('a chain started before its ids were kept: a retry_pending submission behind a megabyte of older submissions still gets its one retry, and the job completes (D27, D40)', async () => {
  const { jobId, orgId, workerId } = await testJob();
  // A simulated upload scored one star below the threshold: retry_pending (the `mixed` scenario's 2nd).
  const view = await simulatedUpload(jobId, workerId, 'retry');
  await waitFor(async () => (await getSubmissionItem(view.id))?.status === 'retry_pending', { timeoutMs: 60_000, intervalMs: 250 });
  await putOlderSettledSubmissions(jobId, orgId, workerId);
  await chainMade(jobId, workerId, 1);

  await tick(jobId, 0);

  expect(await approved(view.id)).toMatchObject({ attempt: 2, status: 'approved' });
  await waitFor(async () => (await getJobItem(jobId, true))?.status === 'completed', { timeoutMs: 30_000, intervalMs: 250 });
}, 180_000);

test('a chain started before its ids were kept does not give up while a submission of its own is still being scored, however many older ones come first (D53)', async () => {
  const { jobId, orgId, workerId } = await testJob();
  await putOlderSettledSubmissions(jobId, orgId, workerId);
  const id = newId('submission');
  await db().send(new PutCommand({
    TableName: tableName(),
    Item: { ...keys.submission(id), GSI1PK: gsi.submission(orgId, 'test', jobId, workerId, id).GSI1PK, GSI1SK: id, entity: 'submission', id, job_id: jobId, org_id: orgId, environment: 'test', worker_id: workerId, status: 'pending_score', attempt: 1, created_at: nowIso() },
  }));
  await chainMade(jobId, workerId, 3); // 3 × files_needed: only the one in flight keeps the chain going
  await indexesCaughtUp(); // such a chain's one read of the index: its subject here is the paging, not the lag (below)

  const r = await tick(jobId, 0);

  expect(r.reason).not.toMatch(/gave up/);
  expect(r.next).not.toBeNull();
  expect(await state(jobId)).toMatchObject({ seq: 1, finished: null });
}, 120_000);

describe('with the job\'s submission index lagging the table, as DynamoDB\'s does', () => {
  // Long enough that nothing written in a test reaches the index before its tick.
  beforeEach(() => emulateIndexLag(30_000));
  afterEach(() => emulateIndexLag(rt.indexLagMs)); // the runtime's own lag again

  test('the simulator does not give up while a submission of its own that has just moved into scoring is not yet in the index (D53)', async () => {
    const { jobId, orgId, workerId } = await testJob();
    const id = newId('submission');
    await db().send(new PutCommand({
      TableName: tableName(),
      Item: { ...keys.submission(id), GSI1PK: gsi.submission(orgId, 'test', jobId, workerId, id).GSI1PK, GSI1SK: id, entity: 'submission', id, job_id: jobId, org_id: orgId, environment: 'test', worker_id: workerId, status: 'pending_score', attempt: 1, created_at: nowIso() },
    }));
    await chainMade(jobId, workerId, 3, [id]); // 3 × files_needed: only the one in flight keeps the chain going

    const r = await tick(jobId, 0);

    expect(r.reason).not.toMatch(/gave up/);
    expect(r.next).not.toBeNull();
    expect(await state(jobId)).toMatchObject({ seq: 1, finished: null, open_submissions: [id] });
  }, 120_000);

  test('a submission of its own that has just become retry_pending gets its one retry at the next tick, before the index shows it (D27)', async () => {
    const { jobId, workerId } = await testJob();
    const view = await simulatedUpload(jobId, workerId, 'retry');
    await waitFor(async () => (await getSubmissionItem(view.id))?.status === 'retry_pending', { timeoutMs: 60_000, intervalMs: 250 });
    await chainMade(jobId, workerId, 1, [view.id]);

    await tick(jobId, 0);

    expect(await approved(view.id)).toMatchObject({ attempt: 2, status: 'approved' });
  }, 180_000);

  test('a tick drops the ids of its submissions that are settled and keeps those of the submissions it starts', async () => {
    const { jobId, workerId } = await testJob();
    const view = await simulatedUpload(jobId, workerId, 'reject');
    await waitFor(async () => (await getSubmissionItem(view.id))?.status === 'rejected', { timeoutMs: 60_000, intervalMs: 250 });
    await chainMade(jobId, workerId, 1, [view.id]);

    const r = await tick(jobId, 0);

    expect(r.reason).toMatch(/uploaded 1/);
    const open = (await state(jobId)).open_submissions as string[];
    expect(open).toHaveLength(1);
    expect(open[0]).not.toBe(view.id);
    expect((await getSubmissionItem(open[0]!))?.worker_id).toBe(workerId);
  }, 180_000);
});
