/**
 * At least once through a crash (D35, D37): the dispatcher dies mid-batch (after sending, before
 * recording); SQS redelivers the unacknowledged batch (simulated here by invoking the consumer
 * again with the same records, as the queue would after the visibility timeout). No event is lost,
 * and the receiver's duplicates carry the same event id. The crash is injected by wrapping the
 * dispatcher's HTTP sender (createDispatcher), not by a hook in production code.
 */
import { randomUUID } from 'node:crypto';
import { marshall } from '@aws-sdk/util-dynamodb';
import type { SQSEvent } from 'aws-lambda';
import { startTestRuntime, type TestRuntime } from '../support/harness';
import { startDevReceiver, type DevReceiver } from '../../shared/webhooks/dev-receiver';
import { createDispatcher, getEvent } from '../../shared/webhooks/dispatcher';
import { postWebhook } from '../../shared/webhooks/sender';
import { handler } from '../../functions/webhooks/dispatch';
import { Tx } from '../../shared/db/tx';
import { emit } from '../../shared/outbox';

let rt: TestRuntime;
let rx: DevReceiver;

beforeAll(async () => {
  // No stream pipe and no poller: this test plays the queue itself.
  rt = await startTestRuntime({ enableStreams: false, enablePollers: false });
  rx = await startDevReceiver();
});
afterAll(async () => {
  await rx?.close();
  await rt?.stop();
});

/** The SQS message a pipe delivers for the INSERT of an event item. */
async function streamRecord(eventId: string) {
  const item = (await getEvent(eventId))!;
  const body = JSON.stringify({
    eventID: randomUUID(),
    eventName: 'INSERT',
    eventSource: 'aws:dynamodb',
    dynamodb: { Keys: marshall({ PK: item.PK, SK: item.SK }), NewImage: marshall(item, { removeUndefinedValues: true }), StreamViewType: 'NEW_IMAGE' },
  });
  return { messageId: randomUUID(), receiptHandle: 'rh', body, attributes: {}, messageAttributes: {}, md5OfBody: '', eventSource: 'aws:sqs', eventSourceARN: 'arn:local', awsRegion: 'us-east-1' };
}

it('D37: a dispatcher crashing mid-batch loses no event, and duplicates carry the same event id', async () => {
  const s = await rt.request('POST', '/v1/auth/signup', { body: { name: 'Crash Co', email: `c-${randomUUID()}@example.com` } });
  const key = s.json.api_key.secret as string;
  const orgId = s.json.organization.id as string;
  const path = '/crash';
  const ep = await rt.request('POST', '/v1/webhook_endpoints', {
    key,
    body: { url: `${rx.url}${path}`, events: ['*'] },
    headers: { 'Idempotency-Key': randomUUID() },
  });
  expect(ep.status).toBe(201);

  const ids: string[] = [];
  for (let i = 0; i < 6; i++) {
    const tx = new Tx();
    ids.push(emit(tx, { orgId, env: 'live', type: 'job.completed', data: { job_id: `job_${i}` } }).id);
    await tx.commit();
  }
  const batch: SQSEvent = { Records: (await Promise.all(ids.map(streamRecord))) as SQSEvent['Records'] };

  class SimulatedCrash extends Error {}
  let sends = 0;
  const crashing = createDispatcher({
    post: async (...args) => {
      const result = await postWebhook(...args);
      if (++sends === 3) throw new SimulatedCrash('the Lambda died after sending, before recording');
      return result;
    },
  });
  const first = await crashing(batch);
  // The record whose delivery was sent but not recorded is not acknowledged.
  expect(first.batchItemFailures).toHaveLength(1);

  // SQS redelivers the whole unacknowledged batch.
  await expect(handler(batch)).resolves.toEqual({ batchItemFailures: [] });

  const got = rx.at(path);
  expect(new Set(got.map((r) => r.event.id))).toEqual(new Set(ids)); // none lost
  expect(got.length).toBeGreaterThan(ids.length); // at least one duplicate...
  for (const r of got) expect(r.headers['webhook-id']).toBe(r.event.id); // ...with the same id
  for (const id of ids) {
    const ev = await getEvent(id);
    expect(ev!.delivery_status).toBe('delivered');
  }
  // Already-delivered events are not sent again by the redelivery.
  expect(got.length).toBe(ids.length + 1);
});
