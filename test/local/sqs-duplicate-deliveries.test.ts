import { GetQueueAttributesCommand, SendMessageCommand, type SQSClient } from '@aws-sdk/client-sqs';
import type { SQSEvent } from 'aws-lambda';
import { silentLog } from '../../local/log';
import { createQueues, localSqsClient, QueuePoller, startSqsEmulator, type LocalQueue, type SqsEmulator } from '../../local/sqs';
import { waitFor } from '../support/harness';

const def = { consumer: 'unused.ts', visibilityTimeoutSeconds: 1, maxReceiveCount: 5, batchSize: 5, consumerTimeoutSeconds: 1, consumerMemoryMb: 128, dlqAlarmThreshold: 1, access: { table: 'read' as const } };

// SQS delivers at least once: the runtime's `duplicateDeliveries` hands every batch to two
// invocations at once, so tests can prove a consumer idempotent; what either completes is deleted.
describe('duplicate deliveries: every batch reaches two invocations at once', () => {
  let emulator: SqsEmulator;
  let sqs: SQSClient;
  const pollers: QueuePoller[] = [];
  beforeAll(async () => {
    emulator = await startSqsEmulator();
    sqs = localSqsClient(emulator.endpoint);
  });
  afterEach(async () => {
    await Promise.all(pollers.splice(0).map((p) => p.stop()));
  });
  afterAll(async () => {
    sqs?.destroy();
    await emulator?.stop();
  });
  const newQueue = async (name: string): Promise<LocalQueue> => (await createQueues(sqs, [{ ...def, name }])).get(name)!;
  const depth = async (url: string) => {
    const { Attributes } = await sqs.send(new GetQueueAttributesCommand({ QueueUrl: url, AttributeNames: ['ApproximateNumberOfMessages', 'ApproximateNumberOfMessagesNotVisible'] }));
    return Number(Attributes!.ApproximateNumberOfMessages) + Number(Attributes!.ApproximateNumberOfMessagesNotVisible);
  };
  const poll = (queue: LocalQueue, handler: (e: SQSEvent) => unknown, duplicateDeliveries = true) => {
    const p = new QueuePoller({ client: sqs, queue, handler: async () => handler, log: silentLog, waitTimeSeconds: 1, duplicateDeliveries });
    pollers.push(p);
    p.start();
  };

  it('each message reaches two invocations, at the same time, with the same message id, and is deleted once both are done', async () => {
    const queue = await newQueue('twice');
    const seen: { id: string; at: number; done: number }[] = [];
    poll(queue, async (e) => {
      const at = Date.now();
      await new Promise((r) => setTimeout(r, 100));
      for (const r of e.Records) seen.push({ id: r.messageId, at, done: Date.now() });
    });
    await sqs.send(new SendMessageCommand({ QueueUrl: queue.url, MessageBody: 'once' }));
    await waitFor(async () => seen.length === 2 && (await depth(queue.url)) === 0);
    expect(seen[0]!.id).toBe(seen[1]!.id);
    expect(seen[1]!.at).toBeLessThan(seen[0]!.done); // overlapping, not one after the other
  });

  it('a message one copy fails and the other completes is deleted, as either receiver’s DeleteMessage deletes it', async () => {
    const queue = await newQueue('one-fails');
    let calls = 0;
    poll(queue, async (e) => {
      if (calls++ % 2 === 0) return { batchItemFailures: e.Records.map((r) => ({ itemIdentifier: r.messageId })) };
      return {};
    });
    await sqs.send(new SendMessageCommand({ QueueUrl: queue.url, MessageBody: 'x' }));
    await waitFor(async () => calls >= 2 && (await depth(queue.url)) === 0);
    expect(calls).toBe(2);
  });

  it('off (the default), a batch reaches one invocation', async () => {
    const queue = await newQueue('once-only');
    let calls = 0;
    poll(queue, () => void calls++, false);
    await sqs.send(new SendMessageCommand({ QueueUrl: queue.url, MessageBody: 'x' }));
    await waitFor(async () => calls >= 1 && (await depth(queue.url)) === 0);
    await new Promise((r) => setTimeout(r, 300));
    expect(calls).toBe(1);
  });
});
