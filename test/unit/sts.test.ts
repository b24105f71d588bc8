/**
 * STS AssumeRole without the SDK client (shared/aws/sts.ts), for the credentials that sign
 * pre-signed upload URLs, and the local runtime's STS emulator (local/sts.ts). The client must be
 * what the SDK's STS client is on the wire; the emulator must answer as STS does, so the SDK's own
 * client reads it, and refuse what STS refuses.
 */
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { AssumeRoleCommand, STSClient } from '@aws-sdk/nested-clients/sts';
import { StsClient } from '../../shared/aws/sts';
import { useQueryServer } from '../support/query-server';
import { clock, now } from '../../shared/clock';
import { IssuedCredentials, startStsEmulator, type StsEmulator } from '../../local/sts';

const ROLE = 'arn:aws:iam::000000000000:role/local-upload-signer';
const local = { accessKeyId: 'local', secretAccessKey: 'local' };
// The published example answer (STS API reference, AssumeRole), trimmed to the fields read.
const PUBLISHED = `<AssumeRoleResponse xmlns="https://sts.amazonaws.com/doc/2011-06-15/">
  <AssumeRoleResult>
    <SourceIdentity>Alice</SourceIdentity>
    <AssumedRoleUser>
      <Arn>arn:aws:sts::123456789012:assumed-role/demo/TestAR</Arn>
      <AssumedRoleId>ARO123EXAMPLE123:TestAR</AssumedRoleId>
    </AssumedRoleUser>
    <Credentials>
      <AccessKeyId>ASIAIOSFODNN7EXAMPLE</AccessKeyId>
      <SecretAccessKey>wJalrXUtnFEMI/K7MDENG/bPxRfiCYzEXAMPLEKEY</SecretAccessKey>
      <SessionToken>AQoDYXdzEPT//////////wEXAMPLEtc764bNrC9SAPBSM22wDOk4x4HIZ8j4FZTwdQWLWsKWHGBuFqwAeMicRXmxfpSPfIeoIYRqTflfKD8YUuwthAx7mSEI/qkPpKPi/kMcGdQrmGdeehM4IC1NtBmUpp2wUE8phUZampKsburEDy0KPkyQDYwT7WZ0wq5VSXDvp75YU9HFvlRd8Tx6q6fE8YQcHNVXAkiY9q6d+xo0rKwT38xVqr7ZD0u0iPPkUL64lIZbqBAz+scqKmlzm8FDrypNC9Yjc8fPOLn9FX9KSYvKTr4rvx3iSIlTJabIQwj2ICCR/oLxBA==</SessionToken>
      <Expiration>2019-11-09T13:34:41Z</Expiration>
    </Credentials>
    <PackedPolicySize>6</PackedPolicySize>
  </AssumeRoleResult>
  <ResponseMetadata>
    <RequestId>c6104cbe-af31-11e0-8154-cbc7ccf896c7</RequestId>
  </ResponseMetadata>
</AssumeRoleResponse>`;

describe('the AssumeRole call, on the wire', () => {
  const wire = useQueryServer(PUBLISHED);

  it('sends what the SDK’s STS client sends for the same input: a signed form POST of Action, Version, RoleArn, RoleSessionName and DurationSeconds', async () => {
    const sdk = new STSClient({ region: 'eu-west-1', endpoint: wire.endpoint, credentials: local });
    await sdk.send(new AssumeRoleCommand({ RoleArn: ROLE, RoleSessionName: 'upload-plan-1a2b', DurationSeconds: 3600 }));
    sdk.destroy();
    const ours = new StsClient({ region: 'eu-west-1', endpoint: wire.endpoint, credentials: async () => local });
    await ours.assumeRole(ROLE, 'upload-plan-1a2b', 3600);
    ours.destroy();
    const [theirs, mine] = wire.seen;
    expect(mine!.req.method).toBe(theirs!.req.method);
    expect(mine!.req.url).toBe(theirs!.req.url);
    expect(Object.fromEntries(new URLSearchParams(mine!.body))).toEqual(Object.fromEntries(new URLSearchParams(theirs!.body)));
    expect(mine!.req.headers['content-type']).toMatch(/^application\/x-www-form-urlencoded/);
    expect(mine!.req.headers.authorization).toMatch(/^AWS4-HMAC-SHA256 Credential=local\/\d{8}\/eu-west-1\/sts\/aws4_request, SignedHeaders=.*host.*, Signature=[0-9a-f]{64}$/);
  });

  it('reads the credentials of the published answer as the SDK reads them', async () => {
    const sdk = new STSClient({ region: 'us-east-1', endpoint: wire.endpoint, credentials: local });
    const theirs = (await sdk.send(new AssumeRoleCommand({ RoleArn: ROLE, RoleSessionName: 's1' }))).Credentials!;
    sdk.destroy();
    const ours = new StsClient({ region: 'us-east-1', endpoint: wire.endpoint, credentials: async () => local });
    const mine = await ours.assumeRole(ROLE, 's1', 3600);
    ours.destroy();
    expect(mine).toEqual({ accessKeyId: theirs.AccessKeyId, secretAccessKey: theirs.SecretAccessKey, sessionToken: theirs.SessionToken, expiration: theirs.Expiration });
  });

  it('an error answer is thrown with STS’s code and message, and a client error is not retried', async () => {
    wire.reply = {
      status: 403,
      body: '<ErrorResponse xmlns="https://sts.amazonaws.com/doc/2011-06-15/"><Error><Type>Sender</Type><Code>AccessDenied</Code><Message>not authorized to perform: sts:AssumeRole</Message></Error><RequestId>r</RequestId></ErrorResponse>',
    };
    const ours = new StsClient({ region: 'us-east-1', endpoint: wire.endpoint, credentials: async () => local });
    await expect(ours.assumeRole(ROLE, 's1', 3600)).rejects.toMatchObject({ name: 'AccessDenied', message: 'not authorized to perform: sts:AssumeRole', $metadata: { httpStatusCode: 403 } });
    ours.destroy();
    expect(wire.seen).toHaveLength(1);
  });
});

it('a call STS does not answer gives up within its budget, its retries included, instead of holding the request', async () => {
  const silent = createServer(() => undefined); // takes the request, never answers
  await new Promise<void>((r) => silent.listen(0, '127.0.0.1', r));
  const client = new StsClient({ region: 'us-east-1', endpoint: `http://127.0.0.1:${(silent.address() as AddressInfo).port}`, credentials: async () => local, budgetMs: 300 });
  try {
    // Aborted by the budget on its first attempt (a socket time-out would fail later, on its third).
    await expect(client.assumeRole(ROLE, 's1', 3600)).rejects.toMatchObject({ name: 'AbortError', $metadata: { attempts: 1 } });
  } finally {
    client.destroy();
    silent.closeAllConnections();
    await new Promise((r) => silent.close(r));
  }
});

describe('the local STS emulator answers as STS does', () => {
  let sts: StsEmulator;
  let issued: IssuedCredentials;
  const call = (input: { RoleArn?: string; DurationSeconds?: number; secret?: string }) => {
    const client = new STSClient({ region: 'us-east-1', endpoint: sts.endpoint, credentials: { accessKeyId: 'local', secretAccessKey: input.secret ?? 'local' }, maxAttempts: 1 });
    return client.send(new AssumeRoleCommand({ RoleArn: input.RoleArn ?? ROLE, RoleSessionName: 'test-session', DurationSeconds: input.DurationSeconds })).finally(() => client.destroy());
  };

  beforeAll(async () => {
    issued = new IssuedCredentials();
    sts = await startStsEmulator({ host: '127.0.0.1', region: 'us-east-1', account: '000000000000', roleArn: ROLE, credentials: local, issued });
  });
  afterAll(() => sts?.stop());
  afterEach(() => clock.reset());

  it('the SDK’s own client assumes the role and gets temporary credentials for the duration asked, on the app’s clock', async () => {
    clock.advance(5 * 60_000);
    const before = Math.floor(now().getTime() / 1000) * 1000;
    const out = await call({ DurationSeconds: 900 });
    const after = Math.floor(now().getTime() / 1000) * 1000; // the app's clock may pass a second during the call
    expect(out.Credentials).toMatchObject({ AccessKeyId: expect.stringMatching(/^ASIA[A-Z2-7]{16}$/), SecretAccessKey: expect.any(String), SessionToken: expect.any(String) });
    expect(out.Credentials!.Expiration!.getTime()).toBeGreaterThanOrEqual(before + 900_000);
    expect(out.Credentials!.Expiration!.getTime()).toBeLessThanOrEqual(after + 900_000);
    expect(out.AssumedRoleUser?.Arn).toBe('arn:aws:sts::000000000000:assumed-role/local-upload-signer/test-session');
    expect(issued.get(out.Credentials!.AccessKeyId!)).toMatchObject({ sessionToken: out.Credentials!.SessionToken });
  });

  it('another role is 403 AccessDenied; nothing is issued', async () => {
    await expect(call({ RoleArn: 'arn:aws:iam::000000000000:role/admin' })).rejects.toMatchObject({ name: 'AccessDenied', $metadata: { httpStatusCode: 403 } });
  });

  it('more than an hour is 400 ValidationError (role chaining caps a session at one hour), less than 15 minutes too', async () => {
    await expect(call({ DurationSeconds: 3601 })).rejects.toMatchObject({ name: 'ValidationError', message: expect.stringContaining('1 hour session limit for roles assumed by role chaining') });
    await expect(call({ DurationSeconds: 899 })).rejects.toMatchObject({ name: 'ValidationError' });
  });

  it('a request signed with another secret is refused 403 SignatureDoesNotMatch', async () => {
    await expect(call({ secret: 'other' })).rejects.toMatchObject({ name: 'SignatureDoesNotMatch', $metadata: { httpStatusCode: 403 } });
  });
});
