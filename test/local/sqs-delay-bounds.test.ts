import { SendMessageBatchCommand, SendMessageCommand, type SQSClient } from '@aws-sdk/client-sqs';
import { localSqsClient, startSqsEmulator, createQueues, type SqsEmulator } from '../../local/sqs';

// SQS takes a message's DelaySeconds from 0 to 900 and refuses any other value
// (InvalidParameterValue); fauxqs took any value, so a delay of an hour passed locally and failed
// deployed. The local SQS refuses it as SQS does (local/fauxqs-process.mjs).
describe('the local SQS holds a message delay to 0..900 seconds, as SQS does', () => {
  let emulator: SqsEmulator;
  let sqs: SQSClient;
  let url: string;
  beforeAll(async () => {
    emulator = await startSqsEmulator();
    sqs = localSqsClient(emulator.endpoint);
    url = (await createQueues(sqs, [{ name: 'delays', consumer: 'x.ts', visibilityTimeoutSeconds: 30, maxReceiveCount: 5, batchSize: 10, consumerTimeoutSeconds: 10, consumerMemoryMb: 128, dlqAlarmThreshold: 1, access: { table: 'read' } }])).get('delays')!.url;
  });
  afterAll(async () => {
    sqs?.destroy();
    await emulator?.stop();
  });

  it('a delay of 900 seconds is taken, on a message and on a batch entry', async () => {
    await expect(sqs.send(new SendMessageCommand({ QueueUrl: url, MessageBody: 'later', DelaySeconds: 900 }))).resolves.toMatchObject({ MessageId: expect.any(String) });
    const batch = await sqs.send(new SendMessageBatchCommand({ QueueUrl: url, Entries: [{ Id: '1', MessageBody: 'later', DelaySeconds: 900 }] }));
    expect(batch.Failed ?? []).toEqual([]);
  });

  it('a delay above 900 seconds is refused with InvalidParameterValue', async () => {
    await expect(sqs.send(new SendMessageCommand({ QueueUrl: url, MessageBody: 'too late', DelaySeconds: 3600 }))).rejects.toMatchObject({ name: 'InvalidParameterValue', message: expect.stringMatching(/DelaySeconds is invalid/), $metadata: { httpStatusCode: 400 } });
  });

  it('a batch entry delayed above 900 seconds is listed as failed with InvalidParameterValue, and the other entries are sent, as SQS answers a batch', async () => {
    const batch = await sqs.send(new SendMessageBatchCommand({ QueueUrl: url, Entries: [{ Id: 'ok', MessageBody: 'fine' }, { Id: 'late', MessageBody: 'too late', DelaySeconds: 901 }] }));
    expect(batch.Successful?.map((e) => e.Id)).toEqual(['ok']);
    expect(batch.Failed).toEqual([expect.objectContaining({ Id: 'late', SenderFault: true, Code: 'InvalidParameterValue', Message: expect.stringMatching(/DelaySeconds is invalid/) })]);
  });
});
