/**
 * D37 (nothing lost): a writer sends an attempt message before it commits the delivery state the
 * message runs under (the replay route after all its sends, the consumer before recording an
 * attempt). Until that state is visible the message waits, re-sending itself; it may drop as
 * superseded only once no writer can still commit, i.e. after the longest writer's time-out.
 */
import { randomUUID } from 'node:crypto';
import { ReceiveMessageCommand, type SQSClient } from '@aws-sdk/client-sqs';
import { startTestRuntime, type TestRuntime } from '../support/harness';
import { signupBuyer } from '../support/buyers';
import { localSqsClient } from '../../local/sqs';
import { fanOut, fanOutToken, NOT_YET_VISIBLE_MS, onAttemptMessage } from '../../shared/webhooks/delivery';
import { getEvent, type DeliveryEntry } from '../../shared/webhooks/dispatcher';
import type { AttemptMessage } from '../../shared/webhooks/queue';
import type { AttemptResult } from '../../shared/webhooks/sender';
import { ROUTE_FUNCTION_TIMEOUT_SECONDS, WEBHOOKS_CONSUMER_TIMEOUT_SECONDS } from '../../shared/manifest/timeouts';
import { QUEUES } from '../../shared/manifest/wiring';
import { Tx } from '../../shared/db/tx';
import { emit } from '../../shared/outbox';

let rt: TestRuntime;
let sqs: SQSClient;

beforeAll(async () => {
  rt = await startTestRuntime({ enableStreams: false, enablePollers: false });
  sqs = localSqsClient(rt.sqsEndpoint);
});
afterAll(async () => {
  sqs?.destroy();
  await rt?.stop();
});

const failed: AttemptResult = { ok: false, statusCode: 500, error: 'http_500', retryAfter: undefined, durationMs: 1 };

/** An event with one pending delivery (its first attempt failed, its retry is queued). */
async function pendingDelivery(): Promise<{ eventId: string; endpointId: string; orgId: string; entry: DeliveryEntry }> {
  const b = await signupBuyer(rt, 'Late Commit Co');
  const ep = await rt.request('POST', '/v1/webhook_endpoints', { key: b.live, body: { url: 'http://127.0.0.1:9/hook', events: ['*'] }, headers: { 'Idempotency-Key': randomUUID() } });
  expect(ep.status).toBe(201);
  const tx = new Tx();
  const eventId = emit(tx, { orgId: b.orgId, env: 'live', type: 'job.completed', data: { job_id: `job_${randomUUID()}` } }).id;
  await tx.commit();
  await fanOut((await getEvent(eventId))!, fanOutToken(randomUUID()), async () => failed);
  const entry = ((await getEvent(eventId))!.deliveries as Record<string, DeliveryEntry>)[ep.json.id]!;
  expect(entry.status).toBe('pending');
  return { eventId, endpointId: ep.json.id as string, orgId: b.orgId, entry };
}

/** A message under a token its delivery does not carry yet (its writer has not committed). */
function uncommitted(d: Awaited<ReturnType<typeof pendingDelivery>>, ageMs: number): AttemptMessage {
  return {
    kind: 'webhook.attempt',
    event_id: d.eventId,
    endpoint_id: d.endpointId,
    org_id: d.orgId,
    environment: 'live',
    token: `tok_${randomUUID()}`,
    expect_attempts: d.entry.attempts,
    retry_index: 1,
    replay: true,
    due_at: new Date(Date.now() - 1_000).toISOString(),
    created_ms: Date.now() - ageMs,
  };
}

async function queuedWithToken(token: string): Promise<boolean> {
  const url = rt.queues.get('webhooks')!.url;
  for (let i = 0; i < 4; i++) {
    const { Messages } = await sqs.send(new ReceiveMessageCommand({ QueueUrl: url, MaxNumberOfMessages: 10, WaitTimeSeconds: 1 }));
    if ((Messages ?? []).some((m) => (JSON.parse(m.Body!) as { token?: string }).token === token)) return true;
  }
  return false;
}

test('D37: the wait for a message\'s state outlasts every writer that sends one (the routes\' and the webhooks consumer\'s time-outs)', () => {
  const consumer = QUEUES.find((q) => q.name === 'webhooks')!.consumerTimeoutSeconds;
  expect(consumer).toBe(WEBHOOKS_CONSUMER_TIMEOUT_SECONDS);
  expect(NOT_YET_VISIBLE_MS).toBeGreaterThan(Math.max(ROUTE_FUNCTION_TIMEOUT_SECONDS, consumer) * 1000);
});

test('D37: a message sent 25 s before its writer commits (a replay route of many endpoints, near its time-out) still waits, not dropped as superseded', async () => {
  const d = await pendingDelivery();
  const msg = uncommitted(d, 25_000);
  await onAttemptMessage(msg, async () => failed);
  expect(await queuedWithToken(msg.token)).toBe(true);
});

test('D37: a message whose state never committed drops once no writer can still commit it', async () => {
  const d = await pendingDelivery();
  const msg = uncommitted(d, NOT_YET_VISIBLE_MS + 1_000);
  await onAttemptMessage(msg, async () => failed);
  expect(await queuedWithToken(msg.token)).toBe(false);
});
