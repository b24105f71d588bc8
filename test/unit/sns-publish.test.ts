/**
 * SNS Publish of an SMS without the SDK client (shared/aws/sns-publish.ts, over the query protocol
 * of shared/aws/query-protocol.ts): on the wire it must be what the SDK's SNS client sends for the
 * same input, and it must read SNS's answers and errors as that client reads them.
 */
import { PublishCommand, SNSClient } from '@aws-sdk/client-sns';
import { SmsPublisher } from '../../shared/aws/sns-publish';
import { useQueryServer } from '../support/query-server';

const local = { accessKeyId: 'local', secretAccessKey: 'local' };
// The published example answer (SNS API reference, Publish).
const PUBLISHED = `<PublishResponse xmlns="https://sns.amazonaws.com/doc/2010-03-31/">
  <PublishResult>
    <MessageId>567910cd-659e-55d4-8ccb-5aaf14679dc0</MessageId>
  </PublishResult>
  <ResponseMetadata>
    <RequestId>d74b8436-ae13-5ab4-a9ff-ce54dfea72a0</RequestId>
  </ResponseMetadata>
</PublishResponse>`;
const PHONE = '+14155550100';
const TEXT = 'Your code is 123456 (valid 10 min) & nothing else: ok?';

const wire = useQueryServer(PUBLISHED);

it('sends what the SDK’s SNS client sends for the same input: a signed form POST of Action, Version, PhoneNumber and Message', async () => {
  const sdk = new SNSClient({ region: 'eu-west-1', endpoint: wire.endpoint, credentials: local });
  const theirs = await sdk.send(new PublishCommand({ PhoneNumber: PHONE, Message: TEXT }));
  sdk.destroy();
  const ours = new SmsPublisher({ region: 'eu-west-1', endpoint: wire.endpoint, credentials: async () => local });
  const mine = await ours.publish(PHONE, TEXT);
  ours.destroy();
  const [t, m] = wire.seen;
  expect([m!.req.method, m!.req.url]).toEqual([t!.req.method, t!.req.url]);
  expect(Object.fromEntries(new URLSearchParams(m!.body))).toEqual(Object.fromEntries(new URLSearchParams(t!.body)));
  expect(new URLSearchParams(m!.body).get('Message')).toBe(TEXT);
  expect(m!.req.headers['content-type']).toMatch(/^application\/x-www-form-urlencoded/);
  expect(m!.req.headers.authorization).toMatch(/^AWS4-HMAC-SHA256 Credential=local\/\d{8}\/eu-west-1\/sns\/aws4_request, SignedHeaders=.*host.*, Signature=[0-9a-f]{64}$/);
  expect(mine).toBe(theirs.MessageId);
});

it('an error answer is thrown with SNS’s code and message, and a client error is not retried', async () => {
  wire.reply = {
    status: 400,
    body: '<ErrorResponse xmlns="https://sns.amazonaws.com/doc/2010-03-31/"><Error><Type>Sender</Type><Code>InvalidParameter</Code><Message>Invalid parameter: PhoneNumber Reason: +1 is not valid to publish to</Message></Error><RequestId>r</RequestId></ErrorResponse>',
  };
  const sdk = new SNSClient({ region: 'us-east-1', endpoint: wire.endpoint, credentials: local, maxAttempts: 3 });
  const theirs = (await sdk.send(new PublishCommand({ PhoneNumber: PHONE, Message: TEXT })).catch((e: unknown) => e)) as Error;
  sdk.destroy();
  const ours = new SmsPublisher({ region: 'us-east-1', endpoint: wire.endpoint, credentials: async () => local });
  const mine = (await ours.publish(PHONE, TEXT).catch((e: unknown) => e)) as Error;
  ours.destroy();
  // Named by SNS's error code; the SDK names it by its modeled class (InvalidParameterException).
  // Nothing reads the name: a failed send answers 503 sms_unavailable whatever the cause.
  expect({ name: mine.name, message: mine.message }).toEqual({ name: 'InvalidParameter', message: theirs.message });
  expect(theirs.name).toBe('InvalidParameterException');
  expect(wire.seen).toHaveLength(2); // one attempt each
});

it.each(['us-east-1', 'eu-west-1', 'cn-north-1', 'us-gov-west-1'])('calls the endpoint the SDK client resolves for the region (%s)', async (region) => {
  const sdk = new SNSClient({ region, credentials: local });
  const url = (sdk.config.endpointProvider as (p: Record<string, unknown>) => { url: URL })({ Region: region, UseFIPS: false, UseDualStack: false }).url.href;
  sdk.destroy();
  expect(new SmsPublisher({ region }).origin.href).toBe(url);
});
