/**
 * The sandbox's chain of ticks survives a function that stops half-way (at-least-once delivery):
 * a redelivered message continues the chain instead of ending it silently. The `sandbox` queue is
 * not polled here; the test hands its messages to the consumer itself.
 */
import { DeleteMessageCommand, ReceiveMessageCommand, type SQSClient } from '@aws-sdk/client-sqs';
import { GetCommand, UpdateCommand } from '@aws-sdk/lib-dynamodb';
import type { SQSEvent } from 'aws-lambda';
import { startTestRuntime, waitFor, type TestRuntime } from '../support/harness';
import { signupBuyer, idemKey } from '../support/buyers';
import { QUEUES } from '../../shared/manifest/wiring';
import { db, tableName } from '../../shared/db/client';
import { keys } from '../../shared/db/keys';
import { getJobItem } from '../../shared/jobs';
import { TICK_SECONDS } from '../../shared/sandbox/simulator';
import { startChain } from '../../shared/sandbox/chain-state';
import { handler } from '../../functions/sandbox/simulate';
import { queueClient, sqsRecord } from '../pipeline/support';

let rt: TestRuntime;
let sqs: SQSClient;
beforeAll(async () => {
  process.env.SANDBOX_DELAY_SECONDS = '0';
  rt = await startTestRuntime({ onlyQueues: QUEUES.map((q) => q.name).filter((n) => n !== 'sandbox'), indexLagMs: 500 });
  sqs = queueClient(rt);
});
afterAll(async () => {
  sqs?.destroy();
  await rt?.stop();
  delete process.env.SANDBOX_DELAY_SECONDS;
});

/** Takes every message waiting in the sandbox queue (deleting them). */
async function drainSandboxQueue(): Promise<Record<string, any>[]> {
  const url = rt.queues.get('sandbox')!.url;
  const out: Record<string, any>[] = [];
  for (;;) {
    const r = await sqs.send(new ReceiveMessageCommand({ QueueUrl: url, MaxNumberOfMessages: 10, WaitTimeSeconds: 0, VisibilityTimeout: 300 }));
    if (!r.Messages?.length) return out;
    for (const m of r.Messages) {
      out.push(JSON.parse(m.Body!));
      await sqs.send(new DeleteMessageCommand({ QueueUrl: url, ReceiptHandle: m.ReceiptHandle! }));
    }
  }
}
/** The tick messages that become visible within `ms` (ticks are sent with a delay of a few seconds). */
async function ticksWithin(ms: number): Promise<Record<string, any>[]> {
  const out: Record<string, any>[] = [];
  const until = Date.now() + ms;
  while (Date.now() < until) {
    out.push(...(await drainSandboxQueue()).filter((m) => m.kind === 'sandbox.tick'));
    await new Promise((r) => setTimeout(r, 250));
  }
  return out;
}
const TICK_WINDOW_MS = (TICK_SECONDS.busy + 2) * 1000;
const deliver = (body: unknown, id: string) => handler({ Records: [sqsRecord(JSON.stringify(body), id)] } as SQSEvent, {} as never) as Promise<{ batchItemFailures: unknown[] }>;
const state = async (jobId: string) => (await db().send(new GetCommand({ TableName: tableName(), Key: keys.sandboxState(jobId), ConsistentRead: true }))).Item!;

async function testJob(): Promise<{ jobId: string; created: Record<string, any> }> {
  const buyer = await signupBuyer(rt, 'Sandbox Redelivery');
  const r = await rt.request('POST', '/v1/jobs', {
    key: buyer.test,
    headers: { 'Idempotency-Key': idemKey() },
    body: { type: 'data_collection', title: 'Redelivery', description: 'Photos of shapes for a sandbox redelivery test', files_needed: 2, accepted_formats: ['image/jpeg'], price_per_file_cents: 25 },
  });
  expect(r.status).toBe(201);
  const jobId = r.json.id as string;
  // The job.created record the table stream put in the sandbox queue.
  const created = await waitFor(async () => (await drainSandboxQueue()).find((m) => m.dynamodb?.NewImage?.job_id?.S === jobId) ?? null, { timeoutMs: 20_000 });
  return { jobId, created };
}

test('a job.created record redelivered after its first tick failed runs that tick (the chain does not end)', async () => {
  const { jobId, created } = await testJob();
  // The first delivery created the chain's state, then failed before its tick did anything.
  expect(await startChain((await getJobItem(jobId, true))!)).toBe(true);
  expect(await deliver(created, 'redelivered-created')).toEqual({ batchItemFailures: [] });
  const s = await state(jobId);
  expect(s).toMatchObject({ seq: 1, tick_sent: 1, finished: null });
  expect(s.attempts).toBeGreaterThan(0);
  expect(await ticksWithin(TICK_WINDOW_MS)).toEqual([{ kind: 'sandbox.tick', job_id: jobId, seq: 1 }]);
});

test('a tick redelivered after it advanced the chain sends its successor again when that was never sent, and only then', async () => {
  const { jobId, created } = await testJob();
  await deliver(created, 'created');
  expect(await ticksWithin(TICK_WINDOW_MS)).toHaveLength(1); // tick 1, sent and recorded
  // The same tick 0 again: its successor is recorded as sent, so nothing is sent twice.
  await deliver({ kind: 'sandbox.tick', job_id: jobId, seq: 0 }, 'duplicate');
  expect(await ticksWithin(TICK_WINDOW_MS)).toEqual([]);
  // As if the function had stopped between advancing the state and sending tick 1.
  await db().send(new UpdateCommand({ TableName: tableName(), Key: keys.sandboxState(jobId), UpdateExpression: 'REMOVE tick_sent' }));
  await deliver({ kind: 'sandbox.tick', job_id: jobId, seq: 0 }, 'redelivered-tick');
  expect(await ticksWithin(TICK_WINDOW_MS)).toEqual([{ kind: 'sandbox.tick', job_id: jobId, seq: 1 }]);
  expect(await state(jobId)).toMatchObject({ seq: 1, tick_sent: 1 });
});
