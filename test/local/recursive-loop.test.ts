/**
 * Lambda's recursive loop detection (local/lineage.ts): a consumer invoked more than 16 times by
 * one chain of events through its own queue is stopped, and the message goes to the dead-letter
 * queue, unless the wiring allows the loop (RecursiveLoop Allow deployed). Locally each consumer
 * invocation's SQS sends carry its trace header, as the SDK and SQS carry it deployed.
 */
import { GetQueueAttributesCommand, SendMessageCommand, type SQSClient } from '@aws-sdk/client-sqs';
import type { SQSEvent, SQSRecord } from 'aws-lambda';
import { silentLog } from '../../local/log';
import { createQueues, localSqsClient, startSqsEmulator, type LocalQueue, type SqsEmulator } from '../../local/sqs';
import { QueuePoller } from '../../local/sqs-poller';
import { grantedTo } from '../../local/lambda';
import { invocationTraceHeader, invocationsOf, RECURSION_LIMIT } from '../../local/lineage';
import type { JsonRpcClient } from '../../shared/aws/json-rpc';
import { localCredentials } from '../../shared/db/client';
import { sendToQueueUrl, sqsClient } from '../../shared/queues';
import { waitFor } from '../support/harness';

const def = { consumer: 'unused.ts', visibilityTimeoutSeconds: 5, maxReceiveCount: 5, batchSize: 1, consumerTimeoutSeconds: 4, consumerMemoryMb: 128, dlqAlarmThreshold: 1 };

describe('recursive loop detection', () => {
  let emulator: SqsEmulator;
  let sqs: SQSClient;
  let app: JsonRpcClient; // the app's own SQS client: the local grant check sees (and stamps) its calls
  const pollers: QueuePoller[] = [];
  beforeAll(async () => {
    emulator = await startSqsEmulator();
    sqs = localSqsClient(emulator.endpoint);
    app = sqsClient({ endpoint: emulator.endpoint, credentials: async () => localCredentials });
  });
  afterEach(async () => {
    await Promise.all(pollers.splice(0).map((p) => p.stop()));
  });
  afterAll(async () => {
    sqs?.destroy();
    app?.destroy();
    await emulator?.stop();
  });
  const depth = async (url: string) => {
    const { Attributes } = await sqs.send(new GetQueueAttributesCommand({ QueueUrl: url, AttributeNames: ['ApproximateNumberOfMessages'] }));
    return Number(Attributes!.ApproximateNumberOfMessages);
  };
  /** A consumer that sends each message on to its own queue, `hops` times in all. */
  const looping = async (name: string, recursiveLoop: 'allow' | undefined, hops: number) => {
    const queue: LocalQueue = (await createQueues(sqs, [{ ...def, name, recursiveLoop, access: { table: 'read' as const, sendTo: [name] } }])).get(name)!;
    const seen: number[] = [];
    const consumer = grantedTo(name, { table: 'read', sendTo: [name] }, async (e: SQSEvent) => {
      const n = Number(e.Records[0]!.body);
      seen.push(n);
      if (n < hops) await sendToQueueUrl(queue.url, String(n + 1), 0, app);
      return {};
    });
    const p = new QueuePoller({ client: sqs, queue, handler: async () => consumer as never, log: silentLog, waitTimeSeconds: 1 });
    pollers.push(p);
    p.start();
    await sqs.send(new SendMessageCommand({ QueueUrl: queue.url, MessageBody: '1' }));
    return { queue, seen, poller: p };
  };

  test('each invocation counts one more in its chain, whatever other functions counted', () => {
    const record = (header?: string) => ({ attributes: header ? { AWSTraceHeader: header } : {} }) as unknown as SQSRecord;
    const first = invocationTraceHeader([record()], 'a');
    expect(invocationsOf(first, 'a')).toBe(1);
    const second = invocationTraceHeader([record(first)], 'a');
    expect(invocationsOf(second, 'a')).toBe(2);
    const other = invocationTraceHeader([record(second)], 'b');
    expect([invocationsOf(other, 'a'), invocationsOf(other, 'b')]).toEqual([2, 1]);
    expect(other.split(';')[0]).toBe(first.split(';')[0]); // one trace root for the chain
  });

  test('a consumer looping through its own queue is stopped at its 17th invocation of one chain, and the message goes to the dead-letter queue', async () => {
    const { queue, seen, poller } = await looping('loop-terminate', undefined, 40);
    await waitFor(async () => (await depth(queue.dlqUrl)) === 1, { timeoutMs: 30_000 });
    expect(seen).toEqual(Array.from({ length: RECURSION_LIMIT }, (_, i) => i + 1));
    expect(poller.recursiveLoopsStopped).toBe(1);
    expect(await depth(queue.url)).toBe(0);
  });

  test('a consumer whose loop the wiring allows goes on past 16 invocations, nothing dead-lettered', async () => {
    const { queue, seen } = await looping('loop-allow', 'allow', RECURSION_LIMIT + 4);
    await waitFor(async () => seen.length === RECURSION_LIMIT + 4, { timeoutMs: 30_000 });
    expect(await depth(queue.dlqUrl)).toBe(0);
  });

  test('a message sent outside any invocation starts a chain of its own', async () => {
    const { seen } = await looping('loop-fresh', undefined, 3);
    await waitFor(async () => seen.length === 3, { timeoutMs: 30_000 });
    expect(seen).toEqual([1, 2, 3]);
  });
});
