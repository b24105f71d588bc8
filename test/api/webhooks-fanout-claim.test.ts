/**
 * D37 + D64: a second fan-out of the same event (a duplicated stream record, or the local runtime
 * re-enqueueing after a crash) sends nothing: the first fan-out claimed each delivery. A redelivery
 * of the first fan-out's own message (same SQS message id) keeps its claim and completes it.
 */
import { randomUUID } from 'node:crypto';
import { marshall } from '@aws-sdk/util-dynamodb';
import type { SQSEvent, SQSRecord } from 'aws-lambda';
import { startTestRuntime, type TestRuntime } from '../support/harness';
import { signupBuyer, idemKey } from '../support/buyers';
import { startDevReceiver, type DevReceiver } from '../../shared/webhooks/dev-receiver';
import { createDispatcher, getEvent } from '../../shared/webhooks/dispatcher';
import { postWebhook } from '../../shared/webhooks/sender';
import { handler } from '../../functions/webhooks/dispatch';
import { Tx } from '../../shared/db/tx';
import { emit } from '../../shared/outbox';
import { presentEvent } from '../../shared/webhooks/events';

let rt: TestRuntime;
let rx: DevReceiver;
beforeAll(async () => {
  rt = await startTestRuntime({ enableStreams: false, enablePollers: false });
  rx = await startDevReceiver();
});
afterAll(async () => {
  await rx?.close();
  await rt?.stop();
});

async function streamRecord(eventId: string, messageId = randomUUID()): Promise<SQSRecord> {
  const item = (await getEvent(eventId))!;
  const body = JSON.stringify({ eventID: randomUUID(), eventName: 'INSERT', eventSource: 'aws:dynamodb', dynamodb: { NewImage: marshall(item, { removeUndefinedValues: true }) } });
  return { messageId, receiptHandle: 'rh', body, attributes: {}, messageAttributes: {}, md5OfBody: '', eventSource: 'aws:sqs', eventSourceARN: 'arn:local', awsRegion: 'us-east-1' } as unknown as SQSRecord;
}

async function setup(tag: string) {
  const b = await signupBuyer(rt, `Claim ${tag}`);
  for (const p of [`/${tag}-1`, `/${tag}-2`]) {
    const r = await rt.request('POST', '/v1/webhook_endpoints', { key: b.live, body: { url: `${rx.url}${p}`, events: ['*'] }, headers: { 'Idempotency-Key': idemKey() } });
    expect(r.status).toBe(201);
  }
  const tx = new Tx();
  const id = emit(tx, { orgId: b.orgId, env: 'live', type: 'job.completed', data: { job_id: `job_${tag}` } }).id;
  await tx.commit();
  return id;
}

it('two fan-outs of one event, even at the same time, deliver it once per endpoint', async () => {
  const id = await setup('twice');
  const batch: SQSEvent = { Records: [await streamRecord(id), await streamRecord(id)] };
  expect(await handler(batch)).toEqual({ batchItemFailures: [] });
  expect(await handler({ Records: [await streamRecord(id)] })).toEqual({ batchItemFailures: [] });
  expect(rx.at('/twice-1').map((r) => r.event.id)).toEqual([id]);
  expect(rx.at('/twice-2').map((r) => r.event.id)).toEqual([id]);
  expect((await getEvent(id))!.delivery_status).toBe('delivered');
});

it('the redelivered fan-out message keeps its claim and completes what a crash cut short', async () => {
  const id = await setup('crash');
  const record = await streamRecord(id);
  let sends = 0;
  const dying = createDispatcher({
    post: async (...args) => {
      if (++sends === 1) throw new Error('the Lambda died before sending');
      return postWebhook(...args);
    },
  });
  expect((await dying({ Records: [record] })).batchItemFailures).toEqual([{ itemIdentifier: record.messageId }]);
  // Another fan-out of the same event does not take over the claim...
  expect(await handler({ Records: [await streamRecord(id)] })).toEqual({ batchItemFailures: [] });
  const before = rx.at('/crash-1').length + rx.at('/crash-2').length;
  expect(before).toBe(1);
  // ...the redelivery of the claiming message does.
  expect(await handler({ Records: [record] })).toEqual({ batchItemFailures: [] });
  expect(rx.at('/crash-1').map((r) => r.event.id)).toEqual([id]);
  expect(rx.at('/crash-2').map((r) => r.event.id)).toEqual([id]);
  expect((await getEvent(id))!.delivery_status).toBe('delivered');
});

/**
 * One endpoint subscribed to `events`, an event of type job.completed, and a first fan-out that
 * crashes before sending: the endpoint is then changed by `patch`, and the fan-out message comes back.
 */
async function crashThenChange(tag: string, events: string[], patch: Record<string, unknown>) {
  const b = await signupBuyer(rt, `Claim ${tag}`);
  const made = await rt.request('POST', '/v1/webhook_endpoints', { key: b.live, body: { url: `${rx.url}/${tag}-1`, events }, headers: { 'Idempotency-Key': idemKey() } });
  const tx = new Tx();
  const id = emit(tx, { orgId: b.orgId, env: 'live', type: 'job.completed', data: { job_id: `job_${tag}` } }).id;
  await tx.commit();
  const record = await streamRecord(id);
  const dying = createDispatcher({
    post: async () => {
      throw new Error('the Lambda died before sending');
    },
  });
  expect((await dying({ Records: [record] })).batchItemFailures).toHaveLength(1);
  expect((await rt.request('PATCH', `/v1/webhook_endpoints/${made.json.id}`, { key: b.live, body: patch, headers: { 'Idempotency-Key': idemKey() } })).status).toBe(200);
  expect(await handler({ Records: [record] })).toEqual({ batchItemFailures: [] });
  const ev = (await getEvent(id))!;
  return { ev, delivery: (ev.deliveries as Record<string, { status: string; last_error: string }>)[made.json.id], received: rx.at(`/${tag}-1`) };
}

it('an endpoint disabled between a crashed fan-out and its redelivery ends failed: the event does not stay pending', async () => {
  const { ev, delivery, received } = await crashThenChange('gone', ['*'], { status: 'disabled' });
  expect(delivery).toMatchObject({ status: 'failed', last_error: 'endpoint_disabled' });
  expect(ev.delivery_status).toBe('failed');
  // The event list says why, and that no attempt was made.
  expect(presentEvent(ev).deliveries).toEqual([expect.objectContaining({ status: 'failed', attempts: 0, last_attempt_at: null, last_error: 'endpoint_disabled' })]);
  expect(received).toEqual([]);
});

it('an endpoint that no longer subscribes to the event type gets no retry of it: the delivery ends failed (endpoint_unsubscribed)', async () => {
  const { delivery, received } = await crashThenChange('unsub', ['job.completed'], { events: ['job.cancelled'] });
  expect(delivery).toMatchObject({ status: 'failed', last_error: 'endpoint_unsubscribed' });
  expect(received).toEqual([]);
});
