/**
 * Issue 15 / 11.6: the local runtime runs each queue's consumer the way Lambda's event source
 * mapping does, with several invocations (each its own batch) at once, bounded: by default the
 * machine's cores, `concurrency` to change it. A batch that hangs holds one invocation, not the queue.
 */
import { SendMessageCommand } from '@aws-sdk/client-sqs';
import { availableParallelism } from 'node:os';
import type { SQSEvent } from 'aws-lambda';
import { silentLog } from '../../local/log';
import { defaultConsumerConcurrency, localConsumerConcurrency, QueuePoller } from '../../local/sqs-poller';
import { deployedConsumerCap, QUEUES, queueByName } from '../../shared/manifest/wiring';
import { waitFor } from '../support/harness';
import { useSqsEmulator } from '../support/sqs-queues';

const def = {
  consumer: 'unused.ts',
  visibilityTimeoutSeconds: 30,
  maxReceiveCount: 3,
  batchSize: 1,
  consumerTimeoutSeconds: 20,
  consumerMemoryMb: 128,
  dlqAlarmThreshold: 1,
  access: { table: 'read' as const },
};

const releases: (() => void)[] = [];
// Held invocations are released before the pollers stop: stop() waits for them.
const { sqs, newQueue, poll } = useSqsEmulator(def, { beforeStoppingPollers: () => releases.splice(0).forEach((r) => r()) });

/** A consumer whose invocations wait until released; records which bodies are running. */
function holdingConsumer() {
  const running = new Set<string>();
  const handler = async (event: SQSEvent) => {
    const body = event.Records[0]!.body;
    running.add(body);
    await new Promise<void>((r) => releases.push(r));
    running.delete(body);
  };
  return { running, handler };
}

it('by default, as many batches run at once as the machine has cores', async () => {
  expect(defaultConsumerConcurrency()).toBe(Math.max(1, availableParallelism()));
  const queue = await newQueue('cc-default');
  const poller = new QueuePoller({ client: sqs(), queue, handler: async () => async () => undefined, log: silentLog, waitTimeSeconds: 1 });
  expect(poller.concurrency).toBe(defaultConsumerConcurrency());
});

it('locally a consumer never runs more at once than a deploy allows: one per core, capped by the quota cap of a Bedrock or Transcribe consumer; a network-bound consumer by its own cap', () => {
  expect(localConsumerConcurrency(queueByName('scoring'), 32)).toBe(deployedConsumerCap(queueByName('scoring')));
  expect(localConsumerConcurrency(queueByName('scoring'), 2)).toBe(2);
  expect(localConsumerConcurrency(queueByName('webhooks'), 2)).toBe(queueByName('webhooks').maxConcurrency);
  expect(localConsumerConcurrency(queueByName('cancellations'), 32)).toBe(32);
  for (const q of QUEUES) {
    const cap = deployedConsumerCap(q);
    if (cap !== undefined) expect({ queue: q.name, within: localConsumerConcurrency(q, 64) <= cap }).toEqual({ queue: q.name, within: true });
  }
});

it('up to `concurrency` invocations run at once, each with its own batch, and no more', async () => {
  const queue = await newQueue('cc-three');
  const c = holdingConsumer();
  const poller = poll(queue, c.handler, { concurrency: 3 });
  for (const n of [1, 2, 3, 4, 5]) await sqs().send(new SendMessageCommand({ QueueUrl: queue.url, MessageBody: `m${n}` }));
  await waitFor(() => c.running.size === 3);
  expect(poller.peakConcurrency).toBe(3);
  // Free the held invocations: the last two messages then run, never more than three at once.
  releases.splice(0).forEach((r) => r());
  await waitFor(() => c.running.size === 2);
  releases.splice(0).forEach((r) => r());
  await waitFor(() => c.running.size === 0);
  expect(poller.peakConcurrency).toBe(3);
});

it('a hanging batch holds one invocation: the next message is consumed while it hangs', async () => {
  const queue = await newQueue('cc-hang');
  const done: string[] = [];
  const handler = async (event: SQSEvent) => {
    const body = event.Records[0]!.body;
    if (body === 'hang') await new Promise<void>((r) => releases.push(r));
    done.push(body);
  };
  poll(queue, handler, { concurrency: 2 });
  await sqs().send(new SendMessageCommand({ QueueUrl: queue.url, MessageBody: 'hang' }));
  await waitFor(() => releases.length === 1);
  await sqs().send(new SendMessageCommand({ QueueUrl: queue.url, MessageBody: 'other' }));
  await waitFor(() => done.includes('other'));
  expect(done).toEqual(['other']);
});

it('the webhooks queue, which waits on receivers rather than the CPU, declares its own bound', () => {
  expect(QUEUES.find((q) => q.name === 'webhooks')!.maxConcurrency).toBeGreaterThanOrEqual(10);
});
