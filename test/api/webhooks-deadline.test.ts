/**
 * A batch of the webhooks consumer stays within the consumer's Lambda timeout, whatever its
 * receivers do: a record starts only while one attempt's time (plus a margin) is left; the attempt
 * messages there is no time for go back to the queue unchanged and run in a later invocation.
 *
 * Through the real queue and the local poller, which enforces the consumer timeout as Lambda does.
 * The timeouts are shortened for the test (consumer 4.5 s, attempt 2 s, margin 2 s): three attempts
 * of a hanging receiver one after the other (6 s) would pass the consumer timeout. (Not shorter: on
 * a loaded machine the healthy attempt's reads and signing, and the writes after the hanging one,
 * need their share of those seconds.)
 */
import { randomUUID } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { ReceiveMessageCommand, type SQSClient } from '@aws-sdk/client-sqs';
import type { Context, SQSEvent } from 'aws-lambda';
import { startTestRuntime, waitFor, type TestRuntime } from '../support/harness';
import { signupBuyer, idemKey, type TestBuyer } from '../support/buyers';
import { silentLog } from '../../local/log';
import { localSqsClient } from '../../local/sqs';
import { QueuePoller } from '../../local/sqs-poller';
import { startDevReceiver, type DevReceiver } from '../../shared/webhooks/dev-receiver';
import { createDispatcher, DEADLINE_MARGIN_MS, getEvent, MAX_PARALLEL, type DeliveryEntry } from '../../shared/webhooks/dispatcher';
import { fanOut, fanOutToken } from '../../shared/webhooks/delivery';
import { ATTEMPT_TIMEOUT_MS, postWebhook, type AttemptResult } from '../../shared/webhooks/sender';
import { QUEUES } from '../../shared/manifest/wiring';
import { Tx } from '../../shared/db/tx';
import { emit } from '../../shared/outbox';

const CONSUMER_TIMEOUT_S = 4.5;
const TEST_ATTEMPT_TIMEOUT_MS = 2_000;
const MARGIN_MS = 2_000;

let rt: TestRuntime;
let rx: DevReceiver;
let hanging: Server;
let hangingUrl: string;
let poller: QueuePoller | undefined;
let sqs: SQSClient | undefined;

beforeAll(async () => {
  process.env.WEBHOOK_RETRY_SCALE = '0.001';
  // No stream pipe and no runtime poller: the test fans out itself and polls the webhooks queue
  // with its own poller (the shortened consumer timeout).
  rt = await startTestRuntime({ enableStreams: false, enablePollers: false });
  rx = await startDevReceiver();
  hanging = createServer(() => undefined); // accepts every request, never answers
  await new Promise<void>((ok) => hanging.listen(0, '127.0.0.1', ok));
  hangingUrl = `http://127.0.0.1:${(hanging.address() as AddressInfo).port}`;
});
afterAll(async () => {
  await poller?.stop();
  sqs?.destroy();
  hanging?.closeAllConnections();
  await new Promise((r) => hanging?.close(r));
  await rx?.close();
  await rt?.stop();
  delete process.env.WEBHOOK_RETRY_SCALE;
});

async function endpoint(b: TestBuyer, url: string): Promise<string> {
  const r = await rt.request('POST', '/v1/webhook_endpoints', { key: b.live, body: { url, events: ['*'] }, headers: { 'Idempotency-Key': idemKey() } });
  expect(r.status).toBe(201);
  return r.json.id as string;
}

const failed: AttemptResult = { ok: false, statusCode: 500, error: 'http_500', retryAfter: undefined, durationMs: 1 };

/** An event whose first attempt (at the fan-out) failed: its first retry is queued, due at once. */
async function eventWithRetryDue(orgId: string): Promise<string> {
  const tx = new Tx();
  const id = emit(tx, { orgId, env: 'live', type: 'job.completed', data: { job_id: `job_${randomUUID()}` } }).id;
  await tx.commit();
  await fanOut((await getEvent(id))!, fanOutToken(randomUUID()), async () => failed);
  return id;
}

const delivery = async (eventId: string, endpointId: string) => ((await getEvent(eventId))!.deliveries as Record<string, DeliveryEntry>)[endpointId]!;

it('a hanging receiver with three attempts due in one batch never takes the batch past the consumer timeout, and every delivery advances', async () => {
  const slow = await signupBuyer(rt, 'Hanging Co');
  const fast = await signupBuyer(rt, 'Healthy Co');
  const hangingEp = await endpoint(slow, `${hangingUrl}/hang`);
  const healthyEp = await endpoint(fast, `${rx.url}/healthy`);
  const hangingEvents = [await eventWithRetryDue(slow.orgId), await eventWithRetryDue(slow.orgId), await eventWithRetryDue(slow.orgId)];
  const healthyEvent = await eventWithRetryDue(fast.orgId);
  for (const id of hangingEvents) expect(await delivery(id, hangingEp)).toMatchObject({ status: 'pending', attempts: 1 });

  const dispatch = createDispatcher({
    post: (url, body, headers, policy, resolve) => postWebhook(url, body, headers, policy, resolve, TEST_ATTEMPT_TIMEOUT_MS),
    attemptTimeoutMs: TEST_ATTEMPT_TIMEOUT_MS,
    deadlineMarginMs: MARGIN_MS,
  });
  const batches: { at: number; size: number }[] = [];
  const queue = rt.queues.get('webhooks')!;
  poller = new QueuePoller({
    client: (sqs = localSqsClient(rt.sqsEndpoint)),
    queue: { ...queue, def: { ...queue.def, consumerTimeoutSeconds: CONSUMER_TIMEOUT_S } },
    handler: async () => (event: SQSEvent, context: Context) => {
      batches.push({ at: Date.now(), size: event.Records.length });
      return dispatch(event, context);
    },
    log: silentLog,
    waitTimeSeconds: 1,
    concurrency: 1,
  });
  poller.start();

  try {
    await waitFor(
      async () => {
        for (const id of hangingEvents) if ((await delivery(id, hangingEp)).attempts < 2) return false;
        return true;
      },
      { timeoutMs: 30_000, intervalMs: 100 },
    );
    expect(batches[0]!.size).toBe(4); // the three hanging attempts and the healthy one, in one batch
    expect(poller.timedOutBatches).toBe(0);

    // The healthy endpoint's delivery in that batch went out at once, not behind the hanging ones.
    const got = rx.at('/healthy').find((r) => r.event.id === healthyEvent);
    expect(got).toBeDefined();
    expect(got!.receivedAt - batches[0]!.at).toBeLessThan(TEST_ATTEMPT_TIMEOUT_MS);
    await waitFor(async () => (await delivery(healthyEvent, healthyEp)).status === 'delivered');
  } finally {
    await poller.stop();
  }
}, 60_000);

it("every group of a batch starts at once, and a first attempt always fits in the consumer's timeout", () => {
  const webhooks = QUEUES.find((q) => q.name === 'webhooks')!;
  expect(webhooks.batchSize).toBeLessThanOrEqual(MAX_PARALLEL);
  expect(webhooks.consumerTimeoutSeconds * 1000).toBeGreaterThanOrEqual(ATTEMPT_TIMEOUT_MS + DEADLINE_MARGIN_MS);
});

describe('with no time left in the invocation', () => {
  const record = (body: unknown, id: string = randomUUID()) =>
    ({ messageId: id, receiptHandle: 'rh', body: JSON.stringify(body), attributes: {}, messageAttributes: {}, md5OfBody: '', eventSource: 'aws:sqs', eventSourceARN: 'arn:local', awsRegion: 'us-east-1' }) as unknown as SQSEvent['Records'][number];
  /** A due attempt of an event that does not exist: run, it ends at once without a trace. */
  const attempt = (endpointId: string, tag: string) => ({
    kind: 'webhook.attempt',
    event_id: `evt_missing_${tag}_${randomUUID()}`,
    endpoint_id: endpointId,
    org_id: 'org_none',
    environment: 'live',
    token: `tok_${tag}`,
    expect_attempts: 1,
    retry_index: 1,
    replay: false,
    due_at: new Date(Date.now() - 1_000).toISOString(),
    created_ms: Date.now(),
  });
  const fanOutRecord = (id: string) => ({
    eventID: randomUUID(),
    eventName: 'INSERT',
    dynamodb: { NewImage: { entity: { S: 'event' }, id: { S: id }, org_id: { S: 'org_none' }, environment: { S: 'live' }, type: { S: 'job.completed' } } },
  });
  const noTime = { getRemainingTimeInMillis: () => 0 };

  async function resent(eventIds: string[]): Promise<unknown[]> {
    const mine: unknown[] = [];
    const client = (sqs ??= localSqsClient(rt.sqsEndpoint));
    const url = rt.queues.get('webhooks')!.url;
    for (let i = 0; i < 5; i++) {
      const { Messages } = await client.send(new ReceiveMessageCommand({ QueueUrl: url, MaxNumberOfMessages: 10, WaitTimeSeconds: 1 }));
      for (const m of Messages ?? []) {
        const body = JSON.parse(m.Body!) as { event_id?: string };
        if (body.event_id && eventIds.includes(body.event_id)) mine.push(body);
      }
    }
    return mine;
  }

  it('the first record of each group still runs; a later attempt message goes back to the queue unchanged and is acknowledged, a later fan-out record fails', async () => {
    const dispatch = createDispatcher({ maxParallel: 1 });
    const first = attempt('we_x', 'first');
    const later = attempt('we_x', 'later');
    const fan = record(fanOutRecord(`evt_missing_fan_${randomUUID()}`), 'fan-out');
    // One lane: the we_x group starts at once; the fan-out's group waits for the lane.
    const result = await dispatch({ Records: [record(first), record(later), fan] }, noTime);
    expect(result).toEqual({ batchItemFailures: [{ itemIdentifier: 'fan-out' }] });
    expect(await resent([first.event_id, later.event_id])).toEqual([later]);
  });
});
