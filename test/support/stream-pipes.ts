/**
 * A stream poller of its own on a test runtime (started with `enableStreams: false`), recording
 * what it sends and logs, and a way to insert event items: for the tests of what the table
 * stream's pipe and rules do with one record.
 */
import { PutItemCommand } from '@aws-sdk/client-dynamodb';
import { localDynamoClient } from '../../local/dynamodb';
import { silentLog } from '../../local/log';
import { localStreamsClient, memoryCheckpoints, StreamPipes } from '../../local/streams';
import type { TestRuntime } from './harness';

export interface RecordingPipes {
  pipes: StreamPipes;
  /** The partition keys of the records sent, in order. */
  sent: string[];
  /** Error log lines. */
  errors: string[];
  /** Inserts an event item with this partition key (and extra string attributes). */
  putEvent(pk: string, extra?: Record<string, string>): Promise<unknown>;
}

/** Runs `fn` with a started recording poller; `refuse(body)` makes a send fail as SQS would refuse it. */
export async function withRecordingPipes(
  rt: TestRuntime,
  opts: { maxAttempts?: number; refuse?: (body: string) => boolean },
  fn: (r: RecordingPipes) => Promise<void>,
): Promise<void> {
  const ddb = localDynamoClient(rt.dynamoEndpoint);
  const sent: string[] = [];
  const errors: string[] = [];
  const pipes = new StreamPipes({
    client: localStreamsClient(rt.dynamoEndpoint),
    tableName: rt.tableName,
    log: { ...silentLog, error: (msg: string) => errors.push(msg) },
    checkpoints: memoryCheckpoints(),
    intervalMs: 50,
    ...(opts.maxAttempts ? { maxAttempts: opts.maxAttempts } : {}),
    send: async (_queue, body) => {
      if (opts.refuse?.(body)) throw new Error('InvalidMessageContents');
      sent.push(JSON.parse(body).dynamodb.Keys.PK.S);
    },
  });
  await pipes.start();
  const putEvent = (pk: string, extra: Record<string, string> = {}) =>
    ddb.send(
      new PutItemCommand({
        TableName: rt.tableName,
        Item: Object.fromEntries(Object.entries({ PK: pk, SK: 'EVT', entity: 'event', type: 'job.completed', environment: 'live', ...extra }).map(([k, v]) => [k, { S: v }])),
      }),
    );
  try {
    await fn({ pipes, sent, errors, putEvent });
  } finally {
    await pipes.stop();
    ddb.destroy();
  }
}
