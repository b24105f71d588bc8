/**
 * The local poller gives each consumer invocation the queue's Lambda timeout, as Lambda does: the
 * context counts down from `consumerTimeoutSeconds`, and an invocation that runs longer fails its
 * whole batch (nothing deleted; the messages come back after their visibility timeout).
 */
import { SendMessageCommand } from '@aws-sdk/client-sqs';
import type { Context, SQSEvent, SQSRecord } from 'aws-lambda';
import type { LocalQueue } from '../../local/sqs';
import { waitFor } from '../support/harness';
import { useSqsEmulator } from '../support/sqs-queues';

const slowQueue = {
  consumer: 'unused.ts',
  visibilityTimeoutSeconds: 3,
  maxReceiveCount: 5,
  batchSize: 5,
  consumerTimeoutSeconds: 1,
  consumerMemoryMb: 128,
  dlqAlarmThreshold: 1,
  access: { table: 'read' as const },
};

const { sqs, newQueue, poll: startPoller } = useSqsEmulator(slowQueue);
const poll = (queue: LocalQueue, handler: (event: SQSEvent, context: Context) => unknown) => startPoller(queue, handler, { concurrency: 1 });

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

it("a consumer that outlives the queue's consumer timeout fails its batch: its messages are not deleted and come back", async () => {
  const queue = await newQueue('outlived');
  const seen: SQSRecord[] = [];
  const poller = poll(queue, async (event) => {
    seen.push(...event.Records);
    // The first invocation answers success, but only after its 1 s timeout.
    if (seen.length === 1) await sleep(2_000);
    return { batchItemFailures: [] };
  });
  await sqs().send(new SendMessageCommand({ QueueUrl: queue.url, MessageBody: 'slow' }));

  await waitFor(() => seen.length >= 2, { timeoutMs: 10_000 });
  expect(seen.map((r) => [r.body, r.attributes.ApproximateReceiveCount])).toEqual([
    ['slow', '1'],
    ['slow', '2'],
  ]);
  expect(poller.timedOutBatches).toBe(1);
});

it("the consumer's context counts down from the queue's consumer timeout", async () => {
  const queue = await newQueue('countdown');
  const left: number[] = [];
  poll(queue, async (_event, context) => {
    left.push(context.getRemainingTimeInMillis());
    await sleep(300);
    left.push(context.getRemainingTimeInMillis());
  });
  await sqs().send(new SendMessageCommand({ QueueUrl: queue.url, MessageBody: 'tick' }));
  await waitFor(() => left.length >= 2);
  expect(left[0]).toBeLessThanOrEqual(1_000);
  expect(left[0]).toBeGreaterThan(700);
  expect(left[0]! - left[1]!).toBeGreaterThanOrEqual(250);
});
