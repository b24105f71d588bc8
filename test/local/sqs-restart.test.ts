/**
 * Nothing queued is lost when `npm start` stops and starts again: the SQS emulator keeps messages in
 * memory, so the runtime saves them to DATA_DIR on a clean stop and re-sends them on start
 * (local/sqs-snapshot.ts), each with the delay it still had and with its id, sent time and
 * receive count, so the dead-letter queue counts every receive across restarts, as SQS does.
 */
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import { DeleteMessageCommand, GetQueueAttributesCommand, ReceiveMessageCommand, SendMessageCommand, type Message } from '@aws-sdk/client-sqs';
import { localSqsClient } from '../../local/sqs';
import { startRuntime, type Runtime, type RuntimeOptions } from '../../local/runtime';

const dataDir = mkdtempSync(join(tmpdir(), 'sqs-restart-'));
const options = (): RuntimeOptions => ({
  dynamoEndpoint: process.env.DYNAMODB_ENDPOINT,
  dataDir,
  port: 0,
  tableName: `test-${randomBytes(6).toString('hex')}`,
  enablePollers: false, // nothing consumes: the test reads the queues itself
  enableStreams: false,
  enableScheduler: false,
  logLevel: 'error',
  cursorSecret: 'test-cursor-secret',
});

afterAll(() => rmSync(dataDir, { recursive: true, force: true }));

const counts = async (rt: Runtime, url: string) => {
  const sqs = localSqsClient(rt.sqsEndpoint);
  const { Attributes } = await sqs.send(
    new GetQueueAttributesCommand({ QueueUrl: url, AttributeNames: ['ApproximateNumberOfMessages', 'ApproximateNumberOfMessagesDelayed'] }),
  );
  sqs.destroy();
  return { ready: Number(Attributes!.ApproximateNumberOfMessages), delayed: Number(Attributes!.ApproximateNumberOfMessagesDelayed) };
};

test('ready, delayed and dead-lettered messages survive a stop and start, delays kept, attributes intact', async () => {
  const first = await startRuntime(options());
  const webhooks = first.queues.get('webhooks')!;
  const sqs = localSqsClient(first.sqsEndpoint);
  await sqs.send(new SendMessageCommand({ QueueUrl: webhooks.url, MessageBody: '{"n":"ready"}', MessageAttributes: { kind: { DataType: 'String', StringValue: 'attempt' } } }));
  await sqs.send(new SendMessageCommand({ QueueUrl: webhooks.url, MessageBody: '{"n":"later"}', DelaySeconds: 600 }));
  await sqs.send(new SendMessageCommand({ QueueUrl: webhooks.dlqUrl, MessageBody: '{"n":"poison"}' }));
  sqs.destroy();
  await first.stop();
  expect(existsSync(join(dataDir, 'sqs-snapshot.json'))).toBe(true);

  const second = await startRuntime(options());
  try {
    const again = second.queues.get('webhooks')!;
    expect(await counts(second, again.url)).toEqual({ ready: 1, delayed: 1 });
    expect((await counts(second, again.dlqUrl)).ready).toBe(1);

    const client = localSqsClient(second.sqsEndpoint);
    const got = await client.send(new ReceiveMessageCommand({ QueueUrl: again.url, MaxNumberOfMessages: 10, MessageAttributeNames: ['All'] }));
    client.destroy();
    expect(got.Messages?.map((m) => m.Body)).toEqual(['{"n":"ready"}']);
    expect(got.Messages?.[0]?.MessageAttributes?.kind?.StringValue).toBe('attempt');
  } finally {
    await second.stop();
  }
});

test('a received but undeleted (in-flight) message comes back when its visibility timeout would have ended', async () => {
  const ownDir = mkdtempSync(join(tmpdir(), 'sqs-inflight-'));
  try {
    const rt = await startRuntime({ ...options(), dataDir: ownDir });
    const w = rt.queues.get('webhooks')!;
    const sqs = localSqsClient(rt.sqsEndpoint);
    await sqs.send(new SendMessageCommand({ QueueUrl: w.url, MessageBody: '{"n":"taken"}' }));
    const got = await sqs.send(new ReceiveMessageCommand({ QueueUrl: w.url, MaxNumberOfMessages: 10, VisibilityTimeout: 600 }));
    sqs.destroy();
    expect(got.Messages).toHaveLength(1);
    await rt.stop();

    const next = await startRuntime({ ...options(), dataDir: ownDir });
    try {
      expect(await counts(next, next.queues.get('webhooks')!.url)).toEqual({ ready: 0, delayed: 1 });
    } finally {
      await next.stop();
    }
  } finally {
    rmSync(ownDir, { recursive: true, force: true });
  }
});

test('the saved queues stay on disk until the run that restored them stops cleanly: a kill before then restores them again; a clean stop with empty queues removes them', async () => {
  const ownDir = mkdtempSync(join(tmpdir(), 'sqs-kept-'));
  const file = join(ownDir, 'sqs-snapshot.json');
  try {
    const first = await startRuntime({ ...options(), dataDir: ownDir });
    const sqs = localSqsClient(first.sqsEndpoint);
    await sqs.send(new SendMessageCommand({ QueueUrl: first.queues.get('webhooks')!.dlqUrl, MessageBody: '{"n":"poison"}' }));
    sqs.destroy();
    await first.stop();
    const saved = readFileSync(file, 'utf8');

    const second = await startRuntime({ ...options(), dataDir: ownDir });
    // Restored into memory only: until this run stops cleanly, a kill would lose them but for the file.
    expect(readFileSync(file, 'utf8')).toBe(saved);
    const client = localSqsClient(second.sqsEndpoint);
    const dlq = second.queues.get('webhooks')!.dlqUrl;
    const got = await client.send(new ReceiveMessageCommand({ QueueUrl: dlq, MaxNumberOfMessages: 10 }));
    for (const m of got.Messages ?? []) await client.send(new DeleteMessageCommand({ QueueUrl: dlq, ReceiptHandle: m.ReceiptHandle! }));
    client.destroy();
    expect(got.Messages?.map((m) => m.Body)).toEqual(['{"n":"poison"}']);
    await second.stop();
    expect(existsSync(file)).toBe(false);
  } finally {
    rmSync(ownDir, { recursive: true, force: true });
  }
});

test('a stop with every queue empty writes no snapshot', async () => {
  const emptyDir = mkdtempSync(join(tmpdir(), 'sqs-empty-'));
  try {
    const rt = await startRuntime({ ...options(), dataDir: emptyDir });
    await rt.stop();
    expect(existsSync(join(emptyDir, 'sqs-snapshot.json'))).toBe(false);
  } finally {
    rmSync(emptyDir, { recursive: true, force: true });
  }
});

test('a restored message is the same SQS message: its id, sent time, trace header and receive count survive a stop and start', async () => {
  const ownDir = mkdtempSync(join(tmpdir(), 'sqs-history-'));
  try {
    const rt = await startRuntime({ ...options(), dataDir: ownDir });
    const w = rt.queues.get('webhooks')!;
    const sqs = localSqsClient(rt.sqsEndpoint);
    const trace = 'Root=1-6b093f5c-29be648faba9e4049a8c5888;Parent=7f84652e69965ba7;Sampled=0;Lineage=22879e7c:3';
    await sqs.send(new SendMessageCommand({ QueueUrl: w.url, MessageBody: '{"n":"tried"}', MessageSystemAttributes: { AWSTraceHeader: { DataType: 'String', StringValue: trace } } }));
    let first: Message | undefined;
    for (let i = 0; i < 2; i++) {
      const got = await sqs.send(new ReceiveMessageCommand({ QueueUrl: w.url, VisibilityTimeout: 0, MessageSystemAttributeNames: ['All'] }));
      first ??= got.Messages?.[0];
    }
    sqs.destroy();
    await rt.stop();

    const next = await startRuntime({ ...options(), dataDir: ownDir });
    try {
      const client = localSqsClient(next.sqsEndpoint);
      const got = await client.send(new ReceiveMessageCommand({ QueueUrl: next.queues.get('webhooks')!.url, MessageSystemAttributeNames: ['All'] }));
      client.destroy();
      const m = got.Messages?.[0];
      expect(m?.MessageId).toBe(first?.MessageId);
      expect(m?.Attributes?.SentTimestamp).toBe(first?.Attributes?.SentTimestamp);
      expect(m?.Attributes?.ApproximateReceiveCount).toBe('3');
      expect(m?.Attributes?.AWSTraceHeader).toBe(trace); // the chain Lambda's loop detection counts
    } finally {
      await next.stop();
    }
  } finally {
    rmSync(ownDir, { recursive: true, force: true });
  }
});

test('a message received maxReceiveCount times before a restart goes to its dead-letter queue at the next receive', async () => {
  const ownDir = mkdtempSync(join(tmpdir(), 'sqs-poison-'));
  try {
    const rt = await startRuntime({ ...options(), dataDir: ownDir });
    const w = rt.queues.get('webhooks')!;
    const sqs = localSqsClient(rt.sqsEndpoint);
    await sqs.send(new SendMessageCommand({ QueueUrl: w.url, MessageBody: '{"n":"poison"}' }));
    for (let i = 0; i < w.def.maxReceiveCount; i++) {
      const got = await sqs.send(new ReceiveMessageCommand({ QueueUrl: w.url, VisibilityTimeout: 0 }));
      expect(got.Messages).toHaveLength(1);
    }
    sqs.destroy();
    await rt.stop();

    const next = await startRuntime({ ...options(), dataDir: ownDir });
    try {
      const again = next.queues.get('webhooks')!;
      const client = localSqsClient(next.sqsEndpoint);
      const got = await client.send(new ReceiveMessageCommand({ QueueUrl: again.url }));
      client.destroy();
      expect(got.Messages ?? []).toHaveLength(0);
      expect((await counts(next, again.dlqUrl)).ready).toBe(1);
    } finally {
      await next.stop();
    }
  } finally {
    rmSync(ownDir, { recursive: true, force: true });
  }
});
