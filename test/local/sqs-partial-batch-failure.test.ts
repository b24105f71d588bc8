import { ReceiveMessageCommand, SendMessageCommand } from '@aws-sdk/client-sqs';
import type { SQSRecord } from 'aws-lambda';
import { successfulRecords } from '../../local/sqs-records';
import { waitFor } from '../support/harness';
import { useSqsEmulator } from '../support/sqs-queues';

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
  // A queue per test: a stopped poller's last long poll may still take a message server-side.
  const { sqs, newQueue, depth, poll } = useSqsEmulator(flaky);

  it('only the failed record is redelivered, with a growing receive count, and lands in the DLQ after maxReceiveCount', async () => {
    const queue = await newQueue('flaky-items');
    const seen: SQSRecord[] = [];
    poll(queue, (event) => {
      seen.push(...event.Records);
      return { batchItemFailures: event.Records.filter((r) => r.body === 'bad').map((r) => ({ itemIdentifier: r.messageId })) };
    });
    await sqs().send(new SendMessageCommand({ QueueUrl: queue.url, MessageBody: 'bad' }));
    await sqs().send(new SendMessageCommand({ QueueUrl: queue.url, MessageBody: 'good' }));

    const dead = await waitFor(
      async () => {
        const { Messages } = await sqs().send(new ReceiveMessageCommand({ QueueUrl: queue.dlqUrl, WaitTimeSeconds: 0 }));
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
    await sqs().send(new SendMessageCommand({ QueueUrl: queue.url, MessageBody: 'retry-me' }));
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
