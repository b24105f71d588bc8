import { PutObjectCommand, S3Client } from '@aws-sdk/client-s3';
import { ReceiveMessageCommand, SQSClient, type Message } from '@aws-sdk/client-sqs';
import { getSignedUrl } from '@aws-sdk/s3-request-presigner';
import { startTestRuntime, waitFor, type TestRuntime } from '../support/harness';

// D54: an object created under uploads/ reaches scoring and annotation in parallel, through the
// rule patterns of the wiring; keyframes/ objects reach neither.
describe('an S3 upload fans out to the scoring and annotation queues as an EventBridge event', () => {
  let rt: TestRuntime;
  let s3: S3Client;
  let sqs: SQSClient;

  beforeAll(async () => {
    rt = await startTestRuntime({ enablePollers: false, enableStreams: false });
    const credentials = { accessKeyId: 'local', secretAccessKey: 'local' };
    // Pre-signed PUTs carry no checksum a client cannot satisfy (D61): the app's S3 client setting.
    s3 = new S3Client({ endpoint: rt.s3Endpoint, forcePathStyle: true, region: 'us-east-1', credentials, requestChecksumCalculation: 'WHEN_REQUIRED' });
    sqs = new SQSClient({ endpoint: rt.sqsEndpoint, region: 'us-east-1', credentials });
  });

  afterAll(async () => {
    s3?.destroy();
    sqs?.destroy();
    await rt?.stop();
  });

  async function presignedPut(key: string, body: string): Promise<Response> {
    const url = await getSignedUrl(s3, new PutObjectCommand({ Bucket: rt.bucketName, Key: key, ContentType: 'image/jpeg' }), { expiresIn: 300 });
    return fetch(url, { method: 'PUT', body, headers: { 'Content-Type': 'image/jpeg' } });
  }

  async function drain(queue: string): Promise<Message[]> {
    const { Messages } = await sqs.send(
      new ReceiveMessageCommand({ QueueUrl: rt.queues.get(queue)!.url, MaxNumberOfMessages: 10, WaitTimeSeconds: 0, VisibilityTimeout: 30 }),
    );
    return Messages ?? [];
  }

  it('a pre-signed PUT under uploads/ puts one Object Created event on each target queue; keyframes/ puts none', async () => {
    const keyframe = await presignedPut('keyframes/sub_1/frame-0.jpg', 'frame');
    expect(keyframe.status).toBe(200);
    const key = 'uploads/sub_01JTEST/file_01JTEST.jpg';
    const put = await presignedPut(key, 'hello-bytes');
    expect(put.status).toBe(200);

    const received: Record<string, Message[]> = { scoring: [], annotation: [] };
    await waitFor(async () => {
      for (const q of Object.keys(received)) received[q]!.push(...(await drain(q)));
      return received.scoring!.length >= 1 && received.annotation!.length >= 1;
    });

    for (const q of ['scoring', 'annotation']) {
      expect(received[q]).toHaveLength(1);
      const event = JSON.parse(received[q]![0]!.Body!);
      expect(event).toEqual({
        version: '0',
        id: expect.stringMatching(/^[0-9a-f-]{36}$/),
        'detail-type': 'Object Created',
        source: 'aws.s3',
        account: '000000000000',
        time: expect.stringMatching(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/),
        region: 'us-east-1',
        resources: [`arn:aws:s3:::${rt.bucketName}`],
        detail: {
          version: '0',
          bucket: { name: rt.bucketName },
          object: { key, size: 'hello-bytes'.length, etag: expect.stringMatching(/^[0-9a-f]{32}$/), sequencer: expect.any(String) },
          'request-id': expect.any(String),
          requester: '000000000000',
          'source-ip-address': '127.0.0.1',
          reason: 'PutObject',
        },
      });
    }
    // The same event (one id) went to both queues, as one rule with two targets sends it.
    expect(JSON.parse(received.scoring![0]!.Body!).id).toBe(JSON.parse(received.annotation![0]!.Body!).id);
  });

  it('the uploaded object is readable through the S3 API', async () => {
    const { GetObjectCommand } = await import('@aws-sdk/client-s3');
    const got = await s3.send(new GetObjectCommand({ Bucket: rt.bucketName, Key: 'uploads/sub_01JTEST/file_01JTEST.jpg' }));
    expect(await got.Body!.transformToString()).toBe('hello-bytes');
  });
});
