import { GetQueueAttributesCommand, ReceiveMessageCommand, SendMessageCommand, type SQSClient } from '@aws-sdk/client-sqs';
import type { SQSEvent, SQSRecord } from 'aws-lambda';
import { silentLog } from '../../local/log';
import { createQueues, localSqsClient, QueuePoller, startSqsEmulator, successfulRecords, type LocalQueue, type SqsEmulator } from '../../local/sqs';
import { waitFor } from '../support/harness';

const flaky = {
  consumer: 'unused.ts',
  visibilityTimeoutSeconds: 1,
  maxReceiveCount: 2,
  batchSize: 5,
  consumerTimeoutSeconds: 1,
  consumerMemoryMb: 128,
  dlqAlarmThreshold: 1,
  access: { table: 'read' as const },
};

describe('a consumer reporting a batch item failure gets the message again, then the DLQ', () => {
  let emulator: SqsEmulator;
  let sqs: SQSClient;
  const pollers: QueuePoller[] = [];

  beforeAll(async () => {
    emulator = await startSqsEmulator();
    sqs = localSqsClient(emulator.endpoint);
  });

  // A queue per test: a stopped poller's last long poll may still take a message server-side.
  const newQueue = async (name: string): Promise<LocalQueue> => (await createQueues(sqs, [{ ...flaky, name }])).get(name)!;

  afterEach(async () => {
    await Promise.all(pollers.splice(0).map((p) => p.stop()));
  });

  afterAll(async () => {
    sqs?.destroy();
    await emulator?.stop();
  });

  const depth = async (url: string) => {
    const { Attributes } = await sqs.send(
      new GetQueueAttributesCommand({ QueueUrl: url, AttributeNames: ['ApproximateNumberOfMessages', 'ApproximateNumberOfMessagesNotVisible'] }),
    );
    return Number(Attributes!.ApproximateNumberOfMessages) + Number(Attributes!.ApproximateNumberOfMessagesNotVisible);
  };

  function poll(queue: LocalQueue, handler: (event: SQSEvent) => unknown): void {
    const poller = new QueuePoller({ client: sqs, queue, handler: async () => handler, log: silentLog, waitTimeSeconds: 1 });
    pollers.push(poller);
    poller.start();
  }

  it('only the failed record is redelivered, with a growing receive count, and lands in the DLQ after maxReceiveCount', async () => {
    const queue = await newQueue('flaky-items');
    const seen: SQSRecord[] = [];
    poll(queue, (event) => {
      seen.push(...event.Records);
      return { batchItemFailures: event.Records.filter((r) => r.body === 'bad').map((r) => ({ itemIdentifier: r.messageId })) };
    });
    await sqs.send(new SendMessageCommand({ QueueUrl: queue.url, MessageBody: 'bad' }));
    await sqs.send(new SendMessageCommand({ QueueUrl: queue.url, MessageBody: 'good' }));

    const dead = await waitFor(
      async () => {
        const { Messages } = await sqs.send(new ReceiveMessageCommand({ QueueUrl: queue.dlqUrl, WaitTimeSeconds: 0 }));
        return Messages?.[0];
      },
      { timeoutMs: 15_000, intervalMs: 200 },
    );
    expect(dead.Body).toBe('bad');

    const bad = seen.filter((r) => r.body === 'bad');
    expect(bad.map((r) => r.attributes.ApproximateReceiveCount)).toEqual(['1', '2']);
    expect(seen.filter((r) => r.body === 'good')).toHaveLength(1);
    expect(bad[0]).toMatchObject({
      eventSource: 'aws:sqs',
      eventSourceARN: queue.arn,
      awsRegion: 'us-east-1',
      messageAttributes: {},
      md5OfBody: expect.stringMatching(/^[0-9a-f]{32}$/),
      attributes: { SentTimestamp: expect.stringMatching(/^\d+$/), SenderId: expect.any(String), ApproximateFirstReceiveTimestamp: expect.stringMatching(/^\d+$/) },
    });
    expect(queue.arn).toBe('arn:aws:sqs:us-east-1:000000000000:flaky-items');
    await waitFor(async () => (await depth(queue.url)) === 0);
  });

  it('a thrown error fails the whole batch', async () => {
    const queue = await newQueue('flaky-batch');
    let calls = 0;
    poll(queue, () => {
      calls++;
      if (calls === 1) throw new Error('boom');
    });
    await sqs.send(new SendMessageCommand({ QueueUrl: queue.url, MessageBody: 'retry-me' }));
    await waitFor(() => calls >= 2);
    await waitFor(async () => (await depth(queue.url)) === 0);
  });
});

describe("Lambda's partial batch response rules", () => {
  const records = ['a', 'b', 'c'].map((id) => ({ messageId: id }) as SQSRecord);
  const ids = (rs: SQSRecord[]) => rs.map((r) => r.messageId);

  it('an empty or missing response is a complete success', () => {
    expect(ids(successfulRecords(records, { result: undefined }))).toEqual(['a', 'b', 'c']);
    expect(ids(successfulRecords(records, { result: { batchItemFailures: [] } }))).toEqual(['a', 'b', 'c']);
  });

  it('listed identifiers fail, the rest succeed', () => {
    expect(ids(successfulRecords(records, { result: { batchItemFailures: [{ itemIdentifier: 'b' }] } }))).toEqual(['a', 'c']);
  });

  it('an unknown or empty identifier, or a thrown error, fails the whole batch', () => {
    expect(successfulRecords(records, { result: { batchItemFailures: [{ itemIdentifier: 'zzz' }] } })).toEqual([]);
    expect(successfulRecords(records, { result: { batchItemFailures: [{ itemIdentifier: '' }] } })).toEqual([]);
    expect(successfulRecords(records, { error: new Error('x') })).toEqual([]);
  });
});
