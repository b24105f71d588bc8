import { SendMessageCommand } from '@aws-sdk/client-sqs';
import type { SQSEvent } from 'aws-lambda';
import type { LocalQueue } from '../../local/sqs';
import { waitFor } from '../support/harness';
import { useSqsEmulator } from '../support/sqs-queues';

const def = { consumer: 'unused.ts', visibilityTimeoutSeconds: 1, maxReceiveCount: 5, batchSize: 5, consumerTimeoutSeconds: 1, consumerMemoryMb: 128, dlqAlarmThreshold: 1, access: { table: 'read' as const } };

// SQS delivers at least once: the runtime's `duplicateDeliveries` hands every batch to a second,
// earlier receiver at the same time, so tests can prove a consumer idempotent; as on SQS, only the
// latest receipt handle's outcome deletes the message.
describe('duplicate deliveries: every batch reaches two invocations at once', () => {
  const { sqs, newQueue, depth, poll: startPoller } = useSqsEmulator(def);
  const poll = (queue: LocalQueue, handler: (e: SQSEvent) => unknown, duplicateDeliveries = true) => {
    startPoller(queue, handler, { duplicateDeliveries });
  };

  it('each message reaches two invocations, at the same time, with the same message id, and is deleted once both are done', async () => {
    const queue = await newQueue('twice');
    const seen: { id: string; at: number; done: number }[] = [];
    poll(queue, async (e) => {
      const at = Date.now();
      await new Promise((r) => setTimeout(r, 100));
      for (const r of e.Records) seen.push({ id: r.messageId, at, done: Date.now() });
    });
    await sqs().send(new SendMessageCommand({ QueueUrl: queue.url, MessageBody: 'once' }));
    await waitFor(async () => seen.length === 2 && (await depth(queue.url)) === 0);
    expect(seen[0]!.id).toBe(seen[1]!.id);
    expect(seen[1]!.at).toBeLessThan(seen[0]!.done); // overlapping, not one after the other
  });

  it('a message whose latest copy fails comes back even though the earlier copy completed (only the latest receipt handle surely deletes it on SQS)', async () => {
    const queue = await newQueue('latest-fails');
    const calls: string[] = [];
    poll(queue, async (e) => {
      const r = e.Records[0]!;
      const earlier = r.receiptHandle.endsWith('.earlier');
      calls.push(`${earlier ? 'earlier' : 'latest'}@${r.attributes.ApproximateReceiveCount}`);
      if (!earlier && r.attributes.ApproximateReceiveCount === '1') return { batchItemFailures: [{ itemIdentifier: r.messageId }] };
      return {};
    });
    await sqs().send(new SendMessageCommand({ QueueUrl: queue.url, MessageBody: 'x' }));
    await waitFor(async () => calls.length >= 4 && (await depth(queue.url)) === 0, { timeoutMs: 15_000 });
    expect(calls.sort()).toEqual(['earlier@1', 'earlier@1', 'latest@1', 'latest@2']);
  });

  it('a message whose latest copy completes is deleted, whatever the earlier copy did', async () => {
    const queue = await newQueue('earlier-fails');
    let calls = 0;
    poll(queue, async (e) => {
      calls++;
      if (e.Records[0]!.receiptHandle.endsWith('.earlier')) throw new Error('the earlier receiver crashed');
    });
    await sqs().send(new SendMessageCommand({ QueueUrl: queue.url, MessageBody: 'x' }));
    await waitFor(async () => calls >= 2 && (await depth(queue.url)) === 0);
    await new Promise((r) => setTimeout(r, 1_500)); // past the visibility timeout: nothing comes back
    expect(calls).toBe(2);
  });

  it('off (the default), a batch reaches one invocation', async () => {
    const queue = await newQueue('once-only');
    let calls = 0;
    poll(queue, () => void calls++, false);
    await sqs().send(new SendMessageCommand({ QueueUrl: queue.url, MessageBody: 'x' }));
    await waitFor(async () => calls >= 1 && (await depth(queue.url)) === 0);
    await new Promise((r) => setTimeout(r, 300));
    expect(calls).toBe(1);
  });
});
