/**
 * Dataset exports (D73) delivered more than once, on the local stack. The table-stream pipe,
 * EventBridge and SQS each deliver at least once, so the `exports` consumer can be asked to build
 * an export while a run of it is still going. The queue pollers and the stream are off: the tests
 * call buildExport (what the consumer runs per message) themselves, and hold each run's write to
 * the bucket, to interleave two runs exactly. Time moves with the clock helper.
 */
import type { SQSEvent } from 'aws-lambda';
import { startTestRuntime, waitFor, type TestRuntime, indexesCaughtUp } from '../support/harness';
import { idemKey, signupBuyer, type TestBuyer } from '../support/buyers';
import { Tx } from '../../shared/db/tx';
import { keys, gsi } from '../../shared/db/keys';
import { idTime, newId } from '../../shared/ids';
import { clock } from '../../shared/clock';
import { ObjectClient } from '../../shared/storage/object-client';
import { AwsServiceError } from '../../shared/aws/signed-call';
import { buildExport, MAX_ATTEMPTS } from '../../shared/exports/build';
import { getExportItem, type ExportItem } from '../../shared/exports/model';
import { queueByName } from '../../shared/manifest/wiring';
import { RetryLater } from '../../shared/work/stage-message';
import { handler as exportsConsumer } from '../../functions/pipeline/export';

const EXPORTS_QUEUE = queueByName('exports');
/** The longest a run lives: Lambda ends the consumer at its time-out. */
const CONSUMER_TIMEOUT_MS = EXPORTS_QUEUE.consumerTimeoutSeconds * 1000;
/** When SQS brings back the message of a run that crashed or timed out (a genuine re-run). */
const REDELIVERY_MS = EXPORTS_QUEUE.visibilityTimeoutSeconds * 1000;

let rt: TestRuntime;
let a: TestBuyer;

beforeAll(async () => {
  rt = await startTestRuntime({ enablePollers: false, enableStreams: false, sandboxDelaySeconds: 900 });
  a = await signupBuyer(rt, 'Redelivered exports');
});
afterAll(() => rt?.stop());

/** A write of an export object, held until the test lets it go through or fail. */
interface HeldWrite {
  key: string;
  go(): void;
  fail(): void;
}
let held: HeldWrite[] = [];
/** Writes past this many go straight through (recorded in `passed`), so a test never waits on one it did not expect. */
let holdAtMost = Infinity;
let passed: string[] = [];
let putSpy: jest.SpyInstance | undefined;

beforeEach(() => {
  held = [];
  passed = [];
  holdAtMost = Infinity;
  const original = ObjectClient.prototype.putObject;
  // Exports this small are one PutObject (no multipart upload).
  putSpy = jest.spyOn(ObjectClient.prototype, 'putObject').mockImplementation(function (this: ObjectClient, ...args: Parameters<ObjectClient['putObject']>) {
    if (!args[0].startsWith('exports/')) return original.apply(this, args);
    if (held.length >= holdAtMost) {
      passed.push(args[0]);
      return original.apply(this, args);
    }
    return new Promise<void>((resolve, reject) => {
      held.push({
        key: args[0],
        go: () => void original.apply(this, args).then(resolve, reject),
        fail: () => reject(new AwsServiceError('InternalError', 'We encountered an internal error.', { httpStatusCode: 500 })),
      });
    });
  });
});
afterEach(() => {
  putSpy?.mockRestore();
  clock.reset();
});

async function newJob(): Promise<string> {
  const r = await rt.request('POST', '/v1/jobs', {
    key: a.test,
    headers: { 'Idempotency-Key': idemKey() },
    body: { type: 'data_collection', description: 'Photos of storefronts in daylight', files_needed: 50, accepted_formats: ['image/jpeg'], price_per_file_cents: 40 },
  });
  if (r.status !== 201) throw new Error(`job: ${r.status} ${r.text}`);
  return r.json.id;
}

/** Files as the approval transaction writes them (shared/files fileItem). */
async function seedFiles(jobId: string, n: number): Promise<void> {
  const tx = new Tx();
  for (let i = 0; i < n; i++) {
    const id = newId('file');
    const subId = newId('submission');
    const createdAt = idTime(id).toISOString(); // the File approved as its id was minted
    tx.put('file', {
      ...keys.file(id),
      ...gsi.file(jobId, id, createdAt),
      entity: 'file',
      id,
      org_id: a.orgId,
      environment: 'test',
      job_id: jobId,
      submission_id: subId,
      worker_id: 'wkr_01ARZ3NDEKTSV4RRFFQ69G5FAV',
      object_key: `uploads/${subId}/r1/${id}.jpg`,
      original_filename: `${id}.jpg`,
      content_type: 'image/jpeg',
      size_bytes: 1234,
      duration_seconds: null,
      width: 640,
      height: 480,
      orientation: null,
      content_hash: `sha256:${'ab'.repeat(32)}`,
      captured_at: '2026-11-20T10:00:00.000Z',
      device_info: { device_model: 'Pixel 8', device_os: 'Android 15', app_version: null },
      worker_region: 'US-CA',
      ai_star_rating: 4,
      annotations: null,
      keyframes: null,
      created_at: createdAt,
    });
  }
  // The approval transaction counts its Files on the job (the export checks its index against it).
  tx.update('job', keys.job(jobId), 'ADD files_approved :n', { values: { ':n': n } });
  await tx.commit();
  // Approved well before the export is asked for: these runs' subject is redelivery, not the index's
  // lag (which test/api/exports.test.ts covers).
  await indexesCaughtUp();
}

/** A pending export, as the create route records it. */
async function newExport(jobId: string): Promise<string> {
  const id = newId('export');
  const at = new Date().toISOString();
  const item: ExportItem = {
    id,
    org_id: a.orgId,
    environment: 'test',
    job_id: jobId,
    format: 'jsonl',
    min_score: 3,
    status: 'pending',
    attempts: 0,
    file_count: null,
    size_bytes: null,
    object_key: null,
    error: null,
    created_at: at,
    updated_at: at,
    started_at: null,
    completed_at: null,
  };
  await new Tx().create('export', { ...keys.export(id), ...gsi.export(jobId, id), entity: 'export', ...item }).commit();
  return id;
}

const item = async (id: string) => (await getExportItem(id))!;
const heldWrites = (n: number) => waitFor(() => held.length >= n);
const eventsOf = async (type: string, exportId: string) =>
  ((await indexesCaughtUp(), await rt.request('GET', `/v1/webhook_events?type=${type}&limit=100`, { key: a.test })).json.data as any[]).filter((e) => e.data.export_id === exportId);

/** One message of the exports queue asking for the export (the create route's old build message). */
const message = (exportId: string): SQSEvent =>
  ({
    Records: [
      {
        messageId: `msg-${exportId}`,
        receiptHandle: 'receipt',
        body: JSON.stringify({ kind: 'export.build', export_id: exportId }),
        attributes: { ApproximateReceiveCount: '1' },
        messageAttributes: {},
        md5OfBody: '',
        eventSource: 'aws:sqs',
        eventSourceARN: 'arn:aws:sqs:us-east-1:000000000000:exports',
        awsRegion: 'us-east-1',
      },
    ],
  }) as unknown as SQSEvent;

test('a message for an export whose run is still alive starts no second run: it is handed back, and the live run records the outcome', async () => {
  const jobId = await newJob();
  await seedFiles(jobId, 2);
  const id = await newExport(jobId);
  holdAtMost = 1;
  const first = buildExport(id);
  await heldWrites(1);

  await expect(buildExport(id)).rejects.toBeInstanceOf(RetryLater);
  // Still alive up to the consumer's time-out (and a margin past it).
  clock.advance(CONSUMER_TIMEOUT_MS);
  await expect(buildExport(id)).rejects.toBeInstanceOf(RetryLater);
  // Not lost: the consumer reports the message failed, so SQS brings it back.
  expect((await exportsConsumer(message(id))).batchItemFailures).toEqual([{ itemIdentifier: `msg-${id}` }]);
  expect(passed).toEqual([]); // no second run wrote anything
  expect(await item(id)).toMatchObject({ status: 'running', attempts: 1 });

  held[0]!.go();
  await expect(first).resolves.toBe('succeeded');
  expect(await item(id)).toMatchObject({ status: 'succeeded', attempts: 1, file_count: 2 });
  expect(await eventsOf('export.completed', id)).toHaveLength(1);
  expect(await eventsOf('export.failed', id)).toHaveLength(0);
});

test('a superseded run records no outcome: its failure does not fail the run that took it over', async () => {
  const jobId = await newJob();
  await seedFiles(jobId, 1);
  const id = await newExport(jobId);
  const first = buildExport(id);
  await heldWrites(1);
  clock.advance(REDELIVERY_MS); // the first run is taken for dead: its message comes back
  const second = buildExport(id);
  await heldWrites(2);

  held[0]!.fail();
  await expect(first).resolves.toBe('superseded');
  expect(await item(id)).toMatchObject({ status: 'running', attempts: 2, error: null });
  expect(await eventsOf('export.failed', id)).toHaveLength(0);

  held[1]!.go();
  await expect(second).resolves.toBe('succeeded');
  expect(await item(id)).toMatchObject({ status: 'succeeded', attempts: 2, file_count: 1, error: null });
  expect(await eventsOf('export.completed', id)).toHaveLength(1);
  expect(await eventsOf('export.failed', id)).toHaveLength(0);
});

test("each run writes its own object: a superseded run's late write does not change the file the export describes", async () => {
  const jobId = await newJob();
  await seedFiles(jobId, 1);
  const id = await newExport(jobId);
  const first = buildExport(id); // encodes the one File, then is held
  await heldWrites(1);
  await seedFiles(jobId, 1);
  clock.advance(REDELIVERY_MS);
  const second = buildExport(id); // encodes both Files
  await heldWrites(2);

  held[1]!.go();
  await expect(second).resolves.toBe('succeeded');
  held[0]!.go(); // the superseded run's write lands last
  await first;

  const exp = (await rt.request('GET', `/v1/exports/${id}`, { key: a.test })).json;
  expect(exp).toMatchObject({ status: 'succeeded', file_count: 2 });
  const res = await fetch(exp.download_url);
  expect(res.status).toBe(200);
  const text = await res.text();
  expect(text.trimEnd().split('\n')).toHaveLength(2);
  expect(exp.size_bytes).toBe(Buffer.byteLength(text));
  expect(held[1]!.key).not.toBe(held[0]!.key);
});

test("a run that died is taken over once the consumer's time-out has passed, and the takeover's result stands", async () => {
  const jobId = await newJob();
  await seedFiles(jobId, 3);
  const id = await newExport(jobId);
  const dead = buildExport(id);
  await heldWrites(1);
  clock.advance(REDELIVERY_MS);

  const again = buildExport(id);
  await heldWrites(2);
  held[1]!.go();
  await expect(again).resolves.toBe('succeeded');
  held[0]!.go();
  await dead;
  expect(await item(id)).toMatchObject({ status: 'succeeded', attempts: 2, file_count: 3, object_key: held[1]!.key });
  expect(await eventsOf('export.completed', id)).toHaveLength(1);
});

test(`after ${MAX_ATTEMPTS} runs that died, the export is failed (export_timed_out), but not while the last run may still be alive`, async () => {
  const jobId = await newJob();
  await seedFiles(jobId, 1);
  const id = await newExport(jobId);
  const runs: Promise<unknown>[] = [];
  for (let n = 1; n <= MAX_ATTEMPTS; n++) {
    runs.push(buildExport(id).catch((err) => err));
    await heldWrites(n);
    clock.advance(REDELIVERY_MS);
  }
  clock.advance(-REDELIVERY_MS + 1000); // a duplicate, one second into the last run
  await expect(buildExport(id)).rejects.toBeInstanceOf(RetryLater);
  expect(await item(id)).toMatchObject({ status: 'running', attempts: MAX_ATTEMPTS });
  expect(await eventsOf('export.failed', id)).toHaveLength(0);

  clock.advance(REDELIVERY_MS); // the last run's message comes back: that run died too
  await expect(buildExport(id)).resolves.toBe('failed');
  expect(await item(id)).toMatchObject({ status: 'failed', attempts: MAX_ATTEMPTS, error: { code: 'export_timed_out' } });
  expect(await eventsOf('export.failed', id)).toHaveLength(1);

  for (const h of held) h.go(); // the dead runs wake up: nothing they do changes the outcome
  await Promise.all(runs);
  expect(await item(id)).toMatchObject({ status: 'failed', error: { code: 'export_timed_out' } });
  expect(await eventsOf('export.completed', id)).toHaveLength(0);
});
