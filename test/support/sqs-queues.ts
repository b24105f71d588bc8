/**
 * The SQS emulator of a test file or describe block, for the tests of the local poller: fresh
 * queues of one shape, their depth, and pollers that are stopped after each test.
 */
import { GetQueueAttributesCommand, type QueueAttributeName, type SQSClient } from '@aws-sdk/client-sqs';
import type { Context, SQSEvent } from 'aws-lambda';
import { silentLog } from '../../local/log';
import { createQueues, localSqsClient, startSqsEmulator, type LocalQueue, type SqsEmulator } from '../../local/sqs';
import { QueuePoller, type QueuePollerOptions } from '../../local/sqs-poller';
import type { QueueDef } from '../../shared/manifest/wiring';

/** A queue's settings but its name. */
export type QueueShape = Omit<QueueDef, 'name'>;

/** A poller's options but the queue, the handler and the log (client: the emulator's; long polls of 1 s). */
export type PollOptions = Partial<Omit<QueuePollerOptions, 'queue' | 'handler' | 'log'>>;

export interface SqsQueues {
  /** The emulator's client (from beforeAll on). */
  sqs(): SQSClient;
  /** Creates `name` and its `-dlq` with the shape's settings, `overrides` replacing some. */
  newQueue(name: string, overrides?: Partial<QueueShape>): Promise<LocalQueue>;
  /** The sum of the queue's `attributeNames` (default: its visible and in-flight messages). */
  depth(url: string, attributeNames?: QueueAttributeName[]): Promise<number>;
  /** Starts a silent poller invoking `handler` per batch; it is stopped after the test. */
  poll(queue: LocalQueue, handler: (event: SQSEvent, context: Context) => unknown, options?: PollOptions): QueuePoller;
}

/**
 * Registers, where it is called, the hooks of one emulator: beforeAll starts it; afterEach runs
 * `beforeStoppingPollers` (e.g. releasing handlers that block, since stop() waits for them), then
 * stops the pollers of the test; afterAll destroys the client and stops the emulator.
 */
export function useSqsEmulator(shape: QueueShape, hooks: { beforeStoppingPollers?: () => void } = {}): SqsQueues {
  let emulator: SqsEmulator | undefined;
  let client: SQSClient | undefined;
  const pollers: QueuePoller[] = [];
  beforeAll(async () => {
    emulator = await startSqsEmulator();
    client = localSqsClient(emulator.endpoint);
  });
  afterEach(async () => {
    hooks.beforeStoppingPollers?.();
    await Promise.all(pollers.splice(0).map((p) => p.stop()));
  });
  afterAll(async () => {
    client?.destroy();
    await emulator?.stop();
  });
  const sqs = (): SQSClient => {
    if (!client) throw new Error('the SQS emulator is not started (use the client from beforeAll on)');
    return client;
  };
  return {
    sqs,
    newQueue: async (name, overrides = {}) => (await createQueues(sqs(), [{ ...shape, ...overrides, name }])).get(name)!,
    depth: async (url, attributeNames = ['ApproximateNumberOfMessages', 'ApproximateNumberOfMessagesNotVisible']) => {
      const { Attributes } = await sqs().send(new GetQueueAttributesCommand({ QueueUrl: url, AttributeNames: attributeNames }));
      return attributeNames.reduce((n, a) => n + Number(Attributes![a]), 0);
    },
    poll: (queue, handler, options = {}) => {
      const poller = new QueuePoller({ client: sqs(), log: silentLog, waitTimeSeconds: 1, ...options, queue, handler: async () => handler });
      pollers.push(poller);
      poller.start();
      return poller;
    },
  };
}
