import { DeleteObjectCommand, GetObjectCommand, HeadObjectCommand, PutObjectCommand, S3Client } from '@aws-sdk/client-s3';
import { getSignedUrl } from '@aws-sdk/s3-request-presigner';
import { clock, HOUR_MS } from '../../shared/clock';
import { presignPut } from '../../shared/storage/s3';
import { ObjectClient } from '../../shared/storage/object-client';
import { StsClient } from '../../shared/aws/sts';
import { HttpRequest } from '@smithy/core/protocols';
import { SignatureV4 } from '@smithy/signature-v4';
import { Sha256 } from '@smithy/core/checksum';
import { checksumOf } from '../../local/s3-checksums';
import { createHash } from 'node:crypto';
import { startTestRuntime, type TestRuntime } from '../support/harness';

// D61: the local S3 checks Signature Version 4 as S3 does (local/s3-front.ts in front of s3rver,
// verifying with local/s3-sigv4.ts).
// A pre-signed PUT of another length or type, a tampered or expired URL is 403 with S3's XML error
// and nothing stored; the pre-signed URLs the app hands out carry no checksum a client cannot meet.
describe('local S3 verifies SigV4 like S3', () => {
  let rt: TestRuntime;
  let s3: S3Client;
  const body = Buffer.from('x'.repeat(1000));
  let n = 0;
  const key = () => `uploads/sigv4-test/${++n}.jpg`;

  beforeAll(async () => {
    rt = await startTestRuntime({ enablePollers: false, enableStreams: false });
    s3 = new S3Client({ endpoint: rt.s3Endpoint, forcePathStyle: true, region: 'us-east-1', credentials: { accessKeyId: 'local', secretAccessKey: 'local' }, requestChecksumCalculation: 'WHEN_REQUIRED' });
  });
  afterAll(async () => {
    clock.reset();
    s3?.destroy();
    await rt?.stop();
  });
  afterEach(() => clock.reset());

  const exists = async (k: string) =>
    s3.send(new HeadObjectCommand({ Bucket: rt.bucketName, Key: k })).then(
      () => true,
      (e: { $metadata?: { httpStatusCode?: number } }) => (e.$metadata?.httpStatusCode === 404 ? false : Promise.reject(e)),
    );

  async function expectS3Error(res: Response, status: number, code: string, message?: string) {
    expect(res.status).toBe(status);
    expect(res.headers.get('content-type')).toBe('application/xml');
    const xml = await res.text();
    expect(xml).toContain(`<Code>${code}</Code>`);
    if (message) expect(xml).toContain(`<Message>${message}</Message>`);
    expect(xml).toMatch(/<RequestId>[^<]+<\/RequestId>/);
  }

  it('the app pre-signs Content-Type, Content-Length, Host and If-None-Match, and no checksum parameter', async () => {
    const { url, headers } = await presignPut(key(), 'image/jpeg', body.length);
    const q = new URL(url).searchParams;
    expect(q.get('X-Amz-SignedHeaders')).toBe('content-length;content-type;host;if-none-match');
    expect([...q.keys()].filter((k) => /checksum/i.test(k))).toEqual([]);
    expect(headers).toEqual({ 'Content-Type': 'image/jpeg', 'Content-Length': String(body.length), 'If-None-Match': '*' });
  });

  describe('an upload URL writes once (If-None-Match: *, a conditional write as in S3)', () => {
    const read = async (k: string) => Buffer.from(await (await s3.send(new GetObjectCommand({ Bucket: rt.bucketName, Key: k }))).Body!.transformToByteArray());

    it('a second PUT to the same URL is 412 PreconditionFailed and the first bytes stay', async () => {
      const k = key();
      const { url, headers } = await presignPut(k, 'image/jpeg', body.length);
      expect((await fetch(url, { method: 'PUT', body, headers })).status).toBe(200);
      const other = Buffer.from('y'.repeat(body.length));
      await expectS3Error(await fetch(url, { method: 'PUT', body: other, headers }), 412, 'PreconditionFailed');
      expect((await read(k)).equals(body)).toBe(true);
    });

    it('two PUTs racing on one URL: exactly one lands, the other is 412', async () => {
      const k = key();
      const { url, headers } = await presignPut(k, 'image/jpeg', body.length);
      const bodies = [body, Buffer.from('z'.repeat(body.length))];
      const statuses = await Promise.all(bodies.map((b) => fetch(url, { method: 'PUT', body: b, headers }).then((r) => r.status)));
      expect([...statuses].sort()).toEqual([200, 412]);
      expect((await read(k)).equals(bodies[statuses.indexOf(200)]!)).toBe(true);
    });

    it('a PUT without the signed If-None-Match is 403 SignatureDoesNotMatch and stores nothing', async () => {
      const k = key();
      const { url, headers } = await presignPut(k, 'image/jpeg', body.length);
      const { 'If-None-Match': _dropped, ...rest } = headers;
      await expectS3Error(await fetch(url, { method: 'PUT', body, headers: rest }), 403, 'SignatureDoesNotMatch');
      expect(await exists(k)).toBe(false);
    });

    it('once the object is deleted (a file refused by its check), the URL writes again', async () => {
      const k = key();
      const { url, headers } = await presignPut(k, 'image/jpeg', body.length);
      expect((await fetch(url, { method: 'PUT', body, headers })).status).toBe(200);
      await s3.send(new DeleteObjectCommand({ Bucket: rt.bucketName, Key: k }));
      expect((await fetch(url, { method: 'PUT', body, headers })).status).toBe(200);
    });
  });

  it('the good PUT succeeds and stores the bytes', async () => {
    const k = key();
    const { url, headers } = await presignPut(k, 'image/jpeg', body.length);
    expect((await fetch(url, { method: 'PUT', body, headers })).status).toBe(200);
    expect(await exists(k)).toBe(true);
  });

  it('an x-amz-* header the URL did not sign (metadata, an ACL) is 403 AccessDenied and stores nothing, as S3 answers', async () => {
    const extras: Record<string, string>[] = [{ 'x-amz-meta-origin': 'phone' }, { 'x-amz-acl': 'public-read' }];
    for (const extra of extras) {
      const k = key();
      const { url, headers } = await presignPut(k, 'image/jpeg', body.length);
      const res = await fetch(url, { method: 'PUT', body, headers: { ...headers, ...extra } });
      const xml = await res.clone().text();
      await expectS3Error(res, 403, 'AccessDenied');
      expect(xml).toContain(`<HeadersNotSigned>${Object.keys(extra)[0]}</HeadersNotSigned>`);
      expect(await exists(k)).toBe(false);
    }
  });

  it('a PUT of another length is 403 SignatureDoesNotMatch and stores nothing', async () => {
    const k = key();
    const { url } = await presignPut(k, 'image/jpeg', body.length);
    const longer = Buffer.concat([body, Buffer.from('more')]);
    await expectS3Error(await fetch(url, { method: 'PUT', body: longer, headers: { 'Content-Type': 'image/jpeg' } }), 403, 'SignatureDoesNotMatch');
    expect(await exists(k)).toBe(false);
  });

  it('a PUT of another type is 403 SignatureDoesNotMatch and stores nothing', async () => {
    const k = key();
    const { url } = await presignPut(k, 'image/jpeg', body.length);
    await expectS3Error(await fetch(url, { method: 'PUT', body, headers: { 'Content-Type': 'text/html' } }), 403, 'SignatureDoesNotMatch');
    expect(await exists(k)).toBe(false);
  });

  it('a PUT without the signed Content-Type is 403 and stores nothing', async () => {
    const k = key();
    const { url } = await presignPut(k, 'image/jpeg', body.length);
    await expectS3Error(await fetch(url, { method: 'PUT', body }), 403, 'SignatureDoesNotMatch');
    expect(await exists(k)).toBe(false);
  });

  it('a tampered signature is 403 SignatureDoesNotMatch and stores nothing', async () => {
    const k = key();
    const { url, headers } = await presignPut(k, 'image/jpeg', body.length);
    const sig = new URL(url).searchParams.get('X-Amz-Signature')!;
    const tampered = url.replace(sig, (sig[0] === 'a' ? 'b' : 'a') + sig.slice(1));
    await expectS3Error(await fetch(tampered, { method: 'PUT', body, headers }), 403, 'SignatureDoesNotMatch');
    expect(await exists(k)).toBe(false);
  });

  it('a URL used for another key is 403 and stores nothing there', async () => {
    const k = key();
    const other = key();
    const { url, headers } = await presignPut(k, 'image/jpeg', body.length);
    await expectS3Error(await fetch(url.replace(k, other), { method: 'PUT', body, headers }), 403, 'SignatureDoesNotMatch');
    expect(await exists(other)).toBe(false);
  });

  it('a PUT after the URL expired is 403 AccessDenied "Request has expired" and stores nothing', async () => {
    const k = key();
    const { url, headers, expires_at } = await presignPut(k, 'image/jpeg', body.length);
    expect(new Date(expires_at).getTime() - Date.now()).toBeLessThanOrEqual(HOUR_MS);
    clock.advance(HOUR_MS + 1000);
    await expectS3Error(await fetch(url, { method: 'PUT', body, headers }), 403, 'AccessDenied', 'Request has expired');
    expect(await exists(k)).toBe(false);
  });

  describe('a pre-signed URL lives only as long as the credentials that signed it', () => {
    const localStsCredentials = async () => ({ accessKeyId: 'local', secretAccessKey: 'local' });
    const assume = (seconds: number) =>
      new StsClient({ region: 'us-east-1', endpoint: process.env.STS_ENDPOINT!, credentials: localStsCredentials }).assumeRole(process.env.UPLOAD_SIGNER_ROLE_ARN!, 'sigv4-test', seconds);

    it('upload URLs are signed with the upload-signing role’s temporary credentials, issued for the hour the URL lasts', async () => {
      const k = key();
      const { url, headers, expires_at } = await presignPut(k, 'image/jpeg', body.length);
      const q = new URL(url).searchParams;
      expect(q.get('X-Amz-Credential')).toMatch(/^ASIA[A-Z2-7]{16}\//);
      expect(q.get('X-Amz-Security-Token')).toEqual(expect.any(String));
      expect(Number(q.get('X-Amz-Expires'))).toBeGreaterThan(3590);
      expect(new Date(expires_at).getTime() - Date.now()).toBeGreaterThan(3590 * 1000);
      expect((await fetch(url, { method: 'PUT', body, headers })).status).toBe(200);
      expect(await exists(k)).toBe(true);
    });

    it('a URL whose credentials expired before it did is refused with 400 ExpiredToken and stores nothing, as S3 refuses it', async () => {
      const k = key();
      const creds = await assume(900);
      const client = new ObjectClient({ region: 'us-east-1', bucket: rt.bucketName, endpoint: rt.s3Endpoint });
      const signedAt = new Date(Math.floor(Date.now() / 1000) * 1000);
      const url = await client.presignPut(k, 'image/jpeg', body.length, 3600, signedAt, creds);
      client.destroy();
      clock.advance(901_000); // the URL has 45 minutes left; its credentials none
      const headers = { 'Content-Type': 'image/jpeg', 'Content-Length': String(body.length), 'If-None-Match': '*' };
      await expectS3Error(await fetch(url, { method: 'PUT', body, headers }), 400, 'ExpiredToken', 'The provided token has expired.');
      expect(await exists(k)).toBe(false);
    });

    it('a plan’s expires_at is capped at its signing credentials’ expiry, so it never promises longer than S3 accepts', async () => {
      // The role's session made shorter than the URL's hour (the emulator issues what is asked).
      const original = StsClient.prototype.assumeRole;
      const issued: { expiration: Date }[] = [];
      const spy = jest.spyOn(StsClient.prototype, 'assumeRole').mockImplementation(async function (this: StsClient, arn: string, name: string) {
        const c = await original.call(this, arn, name, 900);
        issued.push(c);
        return c;
      });
      try {
        const { expires_at } = await presignPut(key(), 'image/jpeg', body.length);
        expect(issued).toHaveLength(1);
        expect(new Date(expires_at).getTime()).toBeLessThanOrEqual(issued[0]!.expiration.getTime());
        expect(new Date(expires_at).getTime()).toBeGreaterThan(issued[0]!.expiration.getTime() - 2000);
      } finally {
        spy.mockRestore();
      }
    });

    it('temporary credentials are used only with their session token; a key the emulator never issued is 403 InvalidAccessKeyId', async () => {
      const creds = await assume(900);
      const client = new ObjectClient({ region: 'us-east-1', bucket: rt.bucketName, endpoint: rt.s3Endpoint });
      const signedAt = new Date(Math.floor(Date.now() / 1000) * 1000);
      const headers = { 'Content-Type': 'image/jpeg', 'Content-Length': String(body.length), 'If-None-Match': '*' };
      const noToken = await client.presignPut(key(), 'image/jpeg', body.length, 600, signedAt, { accessKeyId: creds.accessKeyId, secretAccessKey: creds.secretAccessKey });
      await expectS3Error(await fetch(noToken, { method: 'PUT', body, headers }), 400, 'InvalidToken');
      const unknown = await client.presignPut(key(), 'image/jpeg', body.length, 600, signedAt, { accessKeyId: 'ASIAAAAAAAAAAAAAAAAA', secretAccessKey: creds.secretAccessKey, sessionToken: creds.sessionToken });
      await expectS3Error(await fetch(unknown, { method: 'PUT', body, headers }), 403, 'InvalidAccessKeyId');
      client.destroy();
    });
  });

  it('a URL carrying the checksum of an empty body (the SDK default) is refused for a real body, as S3 refuses it', async () => {
    const defaults = new S3Client({ endpoint: rt.s3Endpoint, forcePathStyle: true, region: 'us-east-1', credentials: { accessKeyId: 'local', secretAccessKey: 'local' } });
    try {
      const k = key();
      const url = await getSignedUrl(defaults, new PutObjectCommand({ Bucket: rt.bucketName, Key: k, ContentType: 'image/jpeg' }), { expiresIn: 300 });
      expect(url).toContain('x-amz-checksum-crc32=');
      await expectS3Error(await fetch(url, { method: 'PUT', body, headers: { 'Content-Type': 'image/jpeg' } }), 400, 'BadDigest');
      expect(await exists(k)).toBe(false);
    } finally {
      defaults.destroy();
    }
  });

  it('an anonymous PUT is 403 AccessDenied', async () => {
    const k = key();
    await expectS3Error(await fetch(`${rt.s3Endpoint}/${rt.bucketName}/${k}`, { method: 'PUT', body }), 403, 'AccessDenied');
    expect(await exists(k)).toBe(false);
  });

  describe('every body checksum S3 knows is checked, none passes unchecked', () => {
    /** A PutObject signed with the local credentials, with the headers given (signed too). */
    const signedPut = async (k: string, data: Buffer, headers: Record<string, string>) => {
      const u = new URL(rt.s3Endpoint);
      const request = new HttpRequest({
        protocol: u.protocol,
        hostname: u.hostname,
        port: Number(u.port),
        method: 'PUT',
        path: `/${rt.bucketName}/${k}`,
        headers: { host: u.host, 'content-length': String(data.length), 'x-amz-content-sha256': 'UNSIGNED-PAYLOAD', ...headers },
        body: data,
      });
      const signer = new SignatureV4({ credentials: { accessKeyId: 'local', secretAccessKey: 'local' }, region: 'us-east-1', service: 's3', sha256: Sha256, uriEscapePath: false, applyChecksum: false });
      const signed = await signer.sign(request);
      return fetch(`${rt.s3Endpoint}${signed.path}`, { method: 'PUT', headers: signed.headers, body: data });
    };

    it.each(['CRC32C', 'CRC64NVME', 'SHA1', 'SHA256', 'CRC32'] as const)('the SDK’s %s of the body is accepted; another value is 400 BadDigest and stores nothing', async (algorithm) => {
      const k = key();
      await s3.send(new PutObjectCommand({ Bucket: rt.bucketName, Key: k, Body: body, ChecksumAlgorithm: algorithm }));
      expect(await exists(k)).toBe(true);
      const wrong = (await checksumOf(algorithm.toLowerCase(), Buffer.from('other bytes')))!;
      const k2 = key();
      await expectS3Error(await signedPut(k2, body, { [`x-amz-checksum-${algorithm.toLowerCase()}`]: wrong }), 400, 'BadDigest');
      expect(await exists(k2)).toBe(false);
    });

    it('a DeleteObjects request that states no hash of its body is 400, as S3 requires Content-MD5 or a checksum; with one it deletes', async () => {
      const k = key();
      await s3.send(new PutObjectCommand({ Bucket: rt.bucketName, Key: k, Body: body }));
      const xml = Buffer.from(`<Delete><Object><Key>${k}</Key></Object><Quiet>true</Quiet></Delete>`);
      const u = new URL(rt.s3Endpoint);
      const post = async (headers: Record<string, string>) => {
        const request = new HttpRequest({
          protocol: u.protocol,
          hostname: u.hostname,
          port: Number(u.port),
          method: 'POST',
          path: `/${rt.bucketName}`,
          query: { delete: '' },
          headers: { host: u.host, 'content-length': String(xml.length), 'x-amz-content-sha256': 'UNSIGNED-PAYLOAD', ...headers },
          body: xml,
        });
        const signer = new SignatureV4({ credentials: { accessKeyId: 'local', secretAccessKey: 'local' }, region: 'us-east-1', service: 's3', sha256: Sha256, uriEscapePath: false, applyChecksum: false });
        const signed = await signer.sign(request);
        return fetch(`${rt.s3Endpoint}${signed.path}?delete`, { method: 'POST', headers: signed.headers, body: xml });
      };
      await expectS3Error(await post({}), 400, 'InvalidRequest', 'Missing required header for this request: Content-MD5 OR x-amz-checksum-*');
      expect(await exists(k)).toBe(true);
      expect((await post({ 'content-md5': createHash('md5').update(xml).digest('base64') })).status).toBe(200);
      expect(await exists(k)).toBe(false);
    });

    it('a checksum algorithm S3 does not know is 400 and stores nothing', async () => {
      const k = key();
      await expectS3Error(await signedPut(k, body, { 'x-amz-checksum-crc16': 'AAAA' }), 400, 'InvalidRequest');
      expect(await exists(k)).toBe(false);
    });

    it('an aws-chunked (STREAMING-…) body, whose chunk signatures and trailer this emulator does not verify, is refused 501, never stored unchecked', async () => {
      const k = key();
      const res = await signedPut(k, body, { 'x-amz-content-sha256': 'STREAMING-UNSIGNED-PAYLOAD-TRAILER', 'x-amz-trailer': 'x-amz-checksum-crc32' });
      await expectS3Error(res, 501, 'NotImplemented');
      expect(await exists(k)).toBe(false);
    });
  });

  it("the SDK's own header-signed calls pass; the same call signed with another secret is 403", async () => {
    const k = key();
    await s3.send(new PutObjectCommand({ Bucket: rt.bucketName, Key: k, Body: body, ContentType: 'image/jpeg' }));
    expect(await exists(k)).toBe(true);
    const wrong = new S3Client({ endpoint: rt.s3Endpoint, forcePathStyle: true, region: 'us-east-1', credentials: { accessKeyId: 'local', secretAccessKey: 'not-local' }, maxAttempts: 1 });
    try {
      const k2 = key();
      await expect(wrong.send(new PutObjectCommand({ Bucket: rt.bucketName, Key: k2, Body: body }))).rejects.toMatchObject({ name: 'SignatureDoesNotMatch', $metadata: { httpStatusCode: 403 } });
      expect(await exists(k2)).toBe(false);
    } finally {
      wrong.destroy();
    }
  });
});
