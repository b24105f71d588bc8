import { PutItemCommand, type DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { ReceiveMessageCommand, SQSClient, type Message } from '@aws-sdk/client-sqs';
import { localDynamoClient } from '../../local/dynamodb';
import { withRecordingPipes } from '../support/stream-pipes';
import { startTestRuntime, waitFor, type TestRuntime } from '../support/harness';

// D35/D40: the outbox rule sends every inserted event item to the webhook dispatcher, and the
// sandbox rule sends test-environment job.created events to the simulated worker.
describe('the table stream forwards inserted event items to their queues, like its pipe, bus and rules', () => {
  let rt: TestRuntime;
  let ddb: DynamoDBClient;
  let sqs: SQSClient;

  beforeAll(async () => {
    rt = await startTestRuntime({ enablePollers: false });
    ddb = localDynamoClient(rt.dynamoEndpoint);
    sqs = new SQSClient({ endpoint: rt.sqsEndpoint, region: 'us-east-1', credentials: { accessKeyId: 'local', secretAccessKey: 'local' } });
  });

  afterAll(async () => {
    ddb?.destroy();
    sqs?.destroy();
    await rt?.stop();
  });

  const put = (item: Record<string, string>) =>
    ddb.send(new PutItemCommand({ TableName: rt.tableName, Item: Object.fromEntries(Object.entries(item).map(([k, v]) => [k, { S: v }])) }));

  async function receive(queue: string): Promise<Message[]> {
    const { Messages } = await sqs.send(new ReceiveMessageCommand({ QueueUrl: rt.queues.get(queue)!.url, MaxNumberOfMessages: 10, WaitTimeSeconds: 0 }));
    return Messages ?? [];
  }

  it('an inserted event item reaches the webhooks queue as the stream record; other items do not', async () => {
    await put({ PK: 'JOB#job_1', SK: 'JOB', entity: 'job', environment: 'live' });
    await put({ PK: 'EVT#evt_1', SK: 'EVT', entity: 'event', type: 'job.completed', environment: 'live' });
    await put({ PK: 'EVT#evt_2', SK: 'EVT', entity: 'event', type: 'job.created', environment: 'test' });

    const webhooks: Message[] = [];
    const sandbox: Message[] = [];
    await waitFor(async () => {
      webhooks.push(...(await receive('webhooks')));
      sandbox.push(...(await receive('sandbox')));
      return webhooks.length >= 2 && sandbox.length >= 1;
    });

    const keys = (ms: Message[]) => ms.map((m) => JSON.parse(m.Body!).dynamodb.Keys.PK.S).sort();
    expect(keys(webhooks)).toEqual(['EVT#evt_1', 'EVT#evt_2']);
    expect(keys(sandbox)).toEqual(['EVT#evt_2']);

    const record = JSON.parse(webhooks.find((m) => m.Body!.includes('evt_1'))!.Body!);
    expect(record).toEqual({
      eventID: expect.any(String),
      eventName: 'INSERT',
      eventVersion: expect.any(String),
      eventSource: 'aws:dynamodb',
      awsRegion: expect.any(String),
      eventSourceARN: expect.stringContaining(`table/${rt.tableName}/stream/`),
      dynamodb: expect.objectContaining({
        ApproximateCreationDateTime: expect.any(Number),
        Keys: { PK: { S: 'EVT#evt_1' }, SK: { S: 'EVT' } },
        NewImage: { PK: { S: 'EVT#evt_1' }, SK: { S: 'EVT' }, entity: { S: 'event' }, type: { S: 'job.completed' }, environment: { S: 'live' } },
        SequenceNumber: expect.any(String),
        StreamViewType: 'NEW_AND_OLD_IMAGES',
      }),
    });
  });
});

// DynamoDB Local's stream hands back an empty map as `{}`; AWS (and so our pipe) sends `{"M":{}}`.
describe('stream records keep the AWS attribute-value shape', () => {
  it('an empty map in an image is {"M":{}}, so unmarshall accepts the record', async () => {
    const { toPipeRecord } = await import('../../local/streams');
    const { unmarshall } = await import('@aws-sdk/util-dynamodb');
    const record = toPipeRecord(
      { eventName: 'INSERT', dynamodb: { NewImage: { data: { M: { empty: {} as never, list: { L: [{} as never] } } } } } } as never,
      'arn:stream',
    );
    expect(record.dynamodb!.NewImage!.data).toEqual({ M: { empty: { M: {} }, list: { L: [{ M: {} }] } } });
    expect(unmarshall(record.dynamodb!.NewImage as never)).toEqual({ data: { empty: {}, list: [{}] } });
  });
});

// The pipe puts each record on the stream bus as one event, and EventBridge refuses an event over
// 1 MiB: locally the record is dead-lettered as the pipe would (its DLQ), not delivered. An item
// is at most 400 KB, but its record's JSON can be larger: a control character takes 6 bytes there.
describe('a stream record whose event is over EventBridge\'s 1 MiB is dead-lettered by the pipe, as deployed', () => {
  let rt: TestRuntime;
  beforeAll(async () => {
    rt = await startTestRuntime({ enablePollers: false, enableStreams: false });
  });
  afterAll(async () => {
    await rt?.stop();
  });

  it('an event item whose record is over 1 MiB as JSON reaches no queue, is dead-lettered at the pipe with a log line, and the next record goes through', async () => {
    await withRecordingPipes(rt, {}, async ({ pipes, sent, errors, putEvent }) => {
      await putEvent('EVT#evt_large', { padding: '\u0001'.repeat(200 * 1024) }); // 200 KB stored, 1.2 MB as JSON
      await putEvent('EVT#evt_after', { padding: 'x'.repeat(350 * 1024) }); // over the old 256 KB, under 1 MiB: delivered
      await waitFor(() => sent.includes('EVT#evt_after'));
      expect(sent).toEqual(['EVT#evt_after']);
      expect(pipes.deadLetters.map((d) => [d.stage, d.name, d.record.dynamodb?.Keys?.PK?.S])).toEqual([['pipe', 'table-stream', 'EVT#evt_large']]);
      expect(errors).toEqual([expect.stringMatching(/pipe table-stream gave up on record .* after 1 attempt \(the event is \d+ bytes, over EventBridge's 1048576\)/)]);
    });
  });
});

// A checkpoint file cut off by a crash must neither stop `npm start` nor make the poller skip to
// the stream's end: no shard is known then, so each is read from its oldest record (TRIM_HORIZON).
describe('stream checkpoints survive a cut-off write', () => {
  it('an unreadable checkpoint file loads as "no shard known" (not "first run"); a saved one reads back', async () => {
    const { mkdtempSync, writeFileSync } = await import('node:fs');
    const { tmpdir } = await import('node:os');
    const { join } = await import('node:path');
    const { fileCheckpoints } = await import('../../local/streams');
    const file = join(mkdtempSync(join(tmpdir(), 'ckpt-')), 'stream-checkpoints.json');
    const store = fileCheckpoints(file);
    expect(store.load()).toBeNull(); // never saved: first run
    writeFileSync(file, '{"shards": {"shardId-1": "12');
    expect(store.load()).toEqual({});
    store.save({ 'shardId-1': '1234' });
    expect(store.load()).toEqual({ 'shardId-1': '1234' });
  });
});
