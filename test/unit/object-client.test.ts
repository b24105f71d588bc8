/**
 * The bucket's small object client (shared/storage/object-client.ts), which replaced the S3 SDK in
 * every function but the exports and the withdrawals (issue 15, cold start). It must be what the
 * SDK is on the wire: the same pre-signed URLs, requests S3 accepts (checked by the local runtime's
 * Signature V4 front, which verifies as S3 does), S3's errors with the SDK's shape, and the SDK's
 * retries.
 */
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { promisify } from 'node:util';
import { build } from 'esbuild';
import { GetObjectTaggingCommand, HeadObjectCommand, PutObjectCommand, S3Client } from '@aws-sdk/client-s3';
import { getSignedUrl } from '@aws-sdk/s3-request-presigner';
import { houseEsbuildOptions } from '../../lib/constructs/house-function';
import { S3_LOCAL_CREDENTIALS, startS3Emulator, type S3Emulator } from '../../local/s3';
import { ObjectClient, type S3Error } from '../../shared/storage/object-client';
import { MIN_PART_SIZE, uploadStream } from '../../shared/storage/stream-upload';

const ROOT = resolve(__dirname, '../..');
const local = async () => ({ ...S3_LOCAL_CREDENTIALS });
const signingDate = new Date('2026-11-26T12:00:00Z');

describe('pre-signed upload URLs', () => {
  const sdkUrl = (s3: S3Client, bucket: string, key: string) =>
    getSignedUrl(s3, new PutObjectCommand({ Bucket: bucket, Key: key, ContentType: 'image/jpeg', ContentLength: 1234, IfNoneMatch: '*' }), {
      expiresIn: 3600,
      signingDate,
      signableHeaders: new Set(['content-type', 'content-length', 'if-none-match']),
    });

  const cases = ['us-east-1', 'eu-west-1', 'cn-north-1', 'us-gov-west-1'].flatMap((region) =>
    ['media-bucket-1a2b', 'media.bucket', 'Media_Bucket'].map((bucket) => [region, bucket] as const),
  );
  it.each(cases)('are the URL the SDK presigner builds for the same object, headers and date (%s, bucket %s, role credentials)', async (region, bucket) => {
    const credentials = { accessKeyId: 'ASIAEXAMPLE', secretAccessKey: 'secret', sessionToken: 'token/with+chars=' };
    const s3 = new S3Client({ region, credentials, requestChecksumCalculation: 'WHEN_REQUIRED' });
    const ours = new ObjectClient({ region, bucket, credentials: async () => credentials });
    const key = 'uploads/sub_01JD0000000000000000000000/r1/file_01JD0000000000000000000000.jpg';
    expect(await ours.presignPut(key, 'image/jpeg', 1234, 3600, signingDate)).toBe(await sdkUrl(s3, bucket, key));
    s3.destroy();
  });

  it('are the SDK presigner’s URL path-style on the local endpoint, with a key that needs escaping', async () => {
    const s3 = new S3Client({ region: 'us-east-1', endpoint: 'http://127.0.0.1:4569', forcePathStyle: true, credentials: S3_LOCAL_CREDENTIALS, requestChecksumCalculation: 'WHEN_REQUIRED' });
    const ours = new ObjectClient({ region: 'us-east-1', bucket: 'media', endpoint: 'http://127.0.0.1:4569', credentials: local });
    const key = "uploads/a b+c/(x)*'!.jpg";
    expect(await ours.presignPut(key, 'image/jpeg', 1234, 3600, signingDate)).toBe(await sdkUrl(s3, 'media', key));
    s3.destroy();
  });
});

describe('calls through the verifying S3 front', () => {
  let dir: string;
  let s3rver: S3Emulator;
  let client: ObjectClient;
  let sdk: S3Client;

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'object-client-'));
    s3rver = await startS3Emulator({ directory: dir, bucket: 'media', account: '000000000000', region: 'us-east-1', onObjectCreated: () => undefined });
    client = new ObjectClient({ region: 'us-east-1', bucket: 'media', endpoint: s3rver.endpoint, credentials: local });
    sdk = new S3Client({ region: 'us-east-1', endpoint: s3rver.endpoint, forcePathStyle: true, credentials: S3_LOCAL_CREDENTIALS });
  });
  afterAll(async () => {
    client?.destroy();
    sdk?.destroy();
    await s3rver?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  it('a stored object reads back byte for byte, with its size, type and Content-Disposition: attachment', async () => {
    const body = Buffer.from(Array.from({ length: 70_000 }, (_, i) => i % 251));
    await client.putObject('uploads/o/1.png', body, 'image/png');
    expect((await client.getObject('uploads/o/1.png')).equals(body)).toBe(true);
    expect(await client.headObject('uploads/o/1.png')).toEqual({ size: body.length, contentType: 'image/png', lastModified: expect.any(Date) });
    const head = await sdk.send(new HeadObjectCommand({ Bucket: 'media', Key: 'uploads/o/1.png' }));
    expect(head.ContentDisposition).toBe('attachment');
  });

  it('tagging replaces the object’s tag set', async () => {
    await client.putObject('uploads/o/2.png', Buffer.from('png'), 'image/png');
    await client.putObjectTagging('uploads/o/2.png', { verdict: 'rejected' });
    await client.putObjectTagging('uploads/o/2.png', { verdict: 'approved' });
    const tags = await sdk.send(new GetObjectTaggingCommand({ Bucket: 'media', Key: 'uploads/o/2.png' }));
    expect(tags.TagSet).toEqual([{ Key: 'verdict', Value: 'approved' }]);
  });

  it('a deleted object is gone, and deleting a missing one succeeds as S3 answers', async () => {
    await client.putObject('uploads/o/3.png', Buffer.from('png'), 'image/png');
    await client.deleteObject('uploads/o/3.png');
    expect(await client.headObject('uploads/o/3.png')).toBeNull();
    await expect(client.deleteObject('uploads/o/3.png')).resolves.toBeUndefined();
  });

  it('DeleteObjects removes every key of the batch in one signed request the front accepts, a missing key counting as deleted', async () => {
    const keys = ['uploads/o/d1.png', 'uploads/o/d2.png', 'uploads/o/d 3+(x).png'];
    for (const k of keys) await client.putObject(k, Buffer.from('png'), 'image/png');
    await client.deleteObjects([...keys, 'uploads/o/never.png']);
    for (const k of keys) expect(await client.headObject(k)).toBeNull();
  });

  it('a missing object: head answers null, a read fails with S3’s NoSuchKey and status 404, as the SDK’s errors do', async () => {
    expect(await client.headObject('uploads/o/none.png')).toBeNull();
    const err = (await client.getObject('uploads/o/none.png').catch((e: unknown) => e)) as S3Error;
    expect(err.name).toBe('NoSuchKey');
    expect(err.$metadata).toMatchObject({ httpStatusCode: 404, attempts: 1 });
    expect(err.$fault).toBe('client');
  });

  it('bundled the house way (the Lambda credential chain in place of the SDK’s), it signs with the credentials Lambda puts in the environment', async () => {
    const out = mkdtempSync(join(tmpdir(), 'object-client-bundle-'));
    try {
      const entry = `import { ObjectClient } from './shared/storage/object-client.ts';
const c = new ObjectClient({ region: 'us-east-1', bucket: 'media', endpoint: process.env.OBJECTS_ENDPOINT });
await c.putObject('uploads/o/bundled.png', Buffer.from('from a bundle'), 'image/png');
process.stdout.write((await c.getObject('uploads/o/bundled.png')).toString());
c.destroy();`;
      const built = await build({ ...houseEsbuildOptions(), stdin: { contents: entry, resolveDir: ROOT, loader: 'ts' }, outfile: join(out, 'index.mjs'), metafile: true });
      expect(Object.keys(built.metafile!.inputs)).toContain('shared/aws/lambda-credentials.ts');
      // What Lambda sets (here the emulator's credentials, which its Signature V4 front checks).
      const env = { PATH: process.env.PATH ?? '', AWS_ACCESS_KEY_ID: S3_LOCAL_CREDENTIALS.accessKeyId, AWS_SECRET_ACCESS_KEY: S3_LOCAL_CREDENTIALS.secretAccessKey, AWS_SESSION_TOKEN: 'session', OBJECTS_ENDPOINT: s3rver.endpoint };
      const r = await promisify(execFile)(process.execPath, [join(out, 'index.mjs')], { env, encoding: 'utf8', timeout: 20_000 });
      expect(r.stdout).toBe('from a bundle');
    } finally {
      rmSync(out, { recursive: true, force: true });
    }
  });

  describe('a stream of unknown length (the exports)', () => {
    const bytes = (n: number, seed: number) => Buffer.from(Array.from({ length: n }, (_, i) => (i * 7 + seed) % 256));
    async function* chunked(b: Buffer, size = 64 * 1024) {
      for (let i = 0; i < b.length; i += size) yield b.subarray(i, i + size);
    }

    it('longer than one part, it is a multipart upload of parts of at least the part size, and reads back byte for byte', async () => {
      const body = bytes(2 * MIN_PART_SIZE + 123_457, 1);
      const r = await uploadStream(client, 'exports/s/big.csv', 'text/csv', chunked(body), { partSize: MIN_PART_SIZE, queueSize: 2 });
      expect(r).toEqual({ sizeBytes: body.length, parts: 3 });
      expect((await client.getObject('exports/s/big.csv')).equals(body)).toBe(true);
      const head = await sdk.send(new HeadObjectCommand({ Bucket: 'media', Key: 'exports/s/big.csv' }));
      expect(head).toMatchObject({ ContentType: 'text/csv', ContentDisposition: 'attachment', ContentLength: body.length });
    });

    it('shorter than one part, it is one PutObject', async () => {
      const body = bytes(200_000, 2);
      const spy = jest.spyOn(client, 'createMultipartUpload');
      try {
        expect(await uploadStream(client, 'exports/s/small.csv', 'text/csv', chunked(body), { partSize: MIN_PART_SIZE, queueSize: 2 })).toEqual({ sizeBytes: body.length, parts: 1 });
        expect(spy).not.toHaveBeenCalled();
      } finally {
        spy.mockRestore();
      }
      expect((await client.getObject('exports/s/small.csv')).equals(body)).toBe(true);
    });

    it('a part that fails aborts the upload: no object, the failure thrown', async () => {
      const body = bytes(3 * MIN_PART_SIZE, 3);
      const failing = Object.create(client) as ObjectClient;
      failing.uploadPart = (key, id, n, b) => (n === 2 ? Promise.reject(new Error('part 2 lost')) : client.uploadPart(key, id, n, b));
      const abort = jest.spyOn(client, 'abortMultipartUpload');
      try {
        await expect(uploadStream(failing, 'exports/s/failed.csv', 'text/csv', chunked(body), { partSize: MIN_PART_SIZE, queueSize: 2 })).rejects.toThrow('part 2 lost');
        expect(abort).toHaveBeenCalledTimes(1);
      } finally {
        abort.mockRestore();
      }
      expect(await client.headObject('exports/s/failed.csv')).toBeNull();
    });

    it('a part size under S3’s 5 MiB minimum is refused before anything is sent', async () => {
      await expect(uploadStream(client, 'exports/s/x.csv', 'text/csv', chunked(bytes(10, 4)), { partSize: 1024, queueSize: 2 })).rejects.toThrow(RangeError);
    });
  });

  describe('the front checks a multipart completion as S3 does (s3rver alone does not)', () => {
    const part = (n: number) => Buffer.alloc(n, 1);
    const start = async (key: string, sizes: number[]) => {
      const id = await client.createMultipartUpload(key, 'text/csv');
      const etags: string[] = [];
      for (const [i, size] of sizes.entries()) etags.push(await client.uploadPart(key, id, i + 1, part(size)));
      return { id, parts: etags.map((etag, i) => ({ partNumber: i + 1, etag })) };
    };
    const refusal = (p: Promise<unknown>) => p.then(() => null, (e: S3Error) => ({ name: e.name, status: e.$metadata?.httpStatusCode }));

    it('a part under 5 MiB that is not the last: 400 EntityTooSmall, and no object', async () => {
      const { id, parts } = await start('exports/m/small.csv', [1024, 1024]);
      expect(await refusal(client.completeMultipartUpload('exports/m/small.csv', id, parts))).toEqual({ name: 'EntityTooSmall', status: 400 });
      expect(await client.headObject('exports/m/small.csv')).toBeNull();
      await client.abortMultipartUpload('exports/m/small.csv', id);
    });

    it('parts listed out of order: 400 InvalidPartOrder', async () => {
      const { id, parts } = await start('exports/m/order.csv', [MIN_PART_SIZE, 10]);
      expect(await refusal(client.completeMultipartUpload('exports/m/order.csv', id, [...parts].reverse()))).toEqual({ name: 'InvalidPartOrder', status: 400 });
      await client.abortMultipartUpload('exports/m/order.csv', id);
    });

    it('an ETag that is not the stored part’s, or a part never uploaded: 400 InvalidPart', async () => {
      const { id, parts } = await start('exports/m/etag.csv', [10]);
      expect(await refusal(client.completeMultipartUpload('exports/m/etag.csv', id, [{ partNumber: 1, etag: '"0123456789abcdef0123456789abcdef"' }]))).toEqual({ name: 'InvalidPart', status: 400 });
      expect(await refusal(client.completeMultipartUpload('exports/m/etag.csv', id, [...parts, { partNumber: 2, etag: parts[0]!.etag }]))).toEqual({ name: 'InvalidPart', status: 400 });
      // The parts as uploaded complete (one part may be under 5 MiB: it is the last).
      await client.completeMultipartUpload('exports/m/etag.csv', id, parts);
      expect((await client.getObject('exports/m/etag.csv')).equals(part(10))).toBe(true);
    });

    it('a part number outside 1..10,000: 400 InvalidArgument', async () => {
      const id = await client.createMultipartUpload('exports/m/n.csv', 'text/csv');
      expect(await refusal(client.uploadPart('exports/m/n.csv', id, 10_001, part(10)))).toEqual({ name: 'InvalidArgument', status: 400 });
      await client.abortMultipartUpload('exports/m/n.csv', id);
    });

    it('an aborted upload, or an upload id issued for another key, is 404 NoSuchUpload', async () => {
      const id = await client.createMultipartUpload('exports/m/a.csv', 'text/csv');
      expect(await refusal(client.uploadPart('exports/m/other.csv', id, 1, part(10)))).toEqual({ name: 'NoSuchUpload', status: 404 });
      await client.abortMultipartUpload('exports/m/a.csv', id);
      expect(await refusal(client.uploadPart('exports/m/a.csv', id, 1, part(10)))).toEqual({ name: 'NoSuchUpload', status: 404 });
      await expect(client.abortMultipartUpload('exports/m/a.csv', id)).resolves.toBeUndefined(); // already gone counts as aborted
    });
  });

  it('a request signed with the wrong secret is refused 403 and not retried', async () => {
    const wrong = new ObjectClient({ region: 'us-east-1', bucket: 'media', endpoint: s3rver.endpoint, credentials: async () => ({ accessKeyId: 'local', secretAccessKey: 'other' }) });
    const err = (await wrong.putObject('uploads/o/4.png', Buffer.from('png'), 'image/png').catch((e: unknown) => e)) as S3Error;
    wrong.destroy();
    expect(err.name).toBe('SignatureDoesNotMatch');
    expect(err.$metadata).toMatchObject({ httpStatusCode: 403, attempts: 1 });
    expect(await client.headObject('uploads/o/4.png')).toBeNull();
  });
});

describe('retries, as the SDK retries', () => {
  let server: Server;
  let answers: { status: number; code?: string; body?: string }[];
  let resetEvery = false;
  let seen: IncomingMessage[];
  let client: ObjectClient;

  beforeAll(async () => {
    server = createServer((req, res) => {
      seen.push(req);
      if (resetEvery) return void req.socket.destroy();
      req.resume();
      const a = answers.shift() ?? { status: 200 };
      if (a.status < 300) return void res.writeHead(a.status, { 'x-amz-request-id': 'REQ' }).end(a.body);
      res.writeHead(a.status, { 'content-type': 'application/xml' }).end(`<?xml version="1.0" encoding="UTF-8"?><Error><Code>${a.code}</Code><Message>m &amp; n</Message></Error>`);
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    client = new ObjectClient({ region: 'us-east-1', bucket: 'media', endpoint: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, credentials: local });
  });
  beforeEach(() => {
    seen = [];
  });
  afterAll(async () => {
    client?.destroy();
    await new Promise((r) => server.close(r));
  });

  it('throttling (503 SlowDown) is retried, and the call succeeds on a later attempt', async () => {
    answers = [{ status: 503, code: 'SlowDown' }, { status: 503, code: 'SlowDown' }];
    await client.putObject('uploads/r/1.png', Buffer.from('png'), 'image/png');
    expect(seen).toHaveLength(3);
  });

  it('a server error that persists fails after the SDK’s 3 attempts, with S3’s code and message', async () => {
    answers = [500, 500, 500, 500].map((status) => ({ status, code: 'InternalError' }));
    const err = (await client.putObjectTagging('uploads/r/2.png', { verdict: 'rejected' }).catch((e: unknown) => e)) as S3Error;
    expect(seen).toHaveLength(3);
    expect(err).toMatchObject({ name: 'InternalError', message: 'm & n', $fault: 'server' });
    expect(err.$metadata).toMatchObject({ httpStatusCode: 500, attempts: 3 });
  });

  it('a connection reset is retried, and the error that ends the call says how many attempts it took', async () => {
    answers = [];
    resetEvery = true;
    try {
      const err = (await client.getObject('uploads/r/4.png').catch((e: unknown) => e)) as Error & { code?: string; $metadata?: { attempts?: number } };
      expect(seen).toHaveLength(3);
      expect(err.code).toBe('ECONNRESET');
      expect(err.$metadata?.attempts).toBe(3);
    } finally {
      resetEvery = false;
    }
  });

  it('a completion S3 answers 200 with an error document in its body fails with that error, retried when S3 names it a server error', async () => {
    const error = (code: string) => `<?xml version="1.0" encoding="UTF-8"?><Error><Code>${code}</Code><Message>We encountered an internal error. Please try again.</Message></Error>`;
    answers = [{ status: 200, body: error('InternalError') }, { status: 200, body: '<CompleteMultipartUploadResult><ETag>"e-1"</ETag></CompleteMultipartUploadResult>' }];
    await client.completeMultipartUpload('exports/r/1.csv', 'up1', [{ partNumber: 1, etag: '"e"' }]);
    expect(seen).toHaveLength(2);
    answers = [{ status: 200, body: error('InvalidPart') }];
    await expect(client.completeMultipartUpload('exports/r/1.csv', 'up1', [{ partNumber: 1, etag: '"e"' }])).rejects.toMatchObject({ name: 'InvalidPart', $metadata: { httpStatusCode: 200 } });
    expect(seen).toHaveLength(3);
  });

  it('a client error (400) is not retried', async () => {
    answers = [{ status: 400, code: 'InvalidTag' }];
    await expect(client.putObjectTagging('uploads/r/3.png', { verdict: 'x' })).rejects.toMatchObject({ name: 'InvalidTag' });
    expect(seen).toHaveLength(1);
  });

  it('DeleteObjects answered 200 with per-key errors fails, naming the keys and their codes (S3 lists only failures in quiet mode)', async () => {
    answers = [{ status: 200, body: '<?xml version="1.0" encoding="UTF-8"?><DeleteResult><Error><Key>uploads/r/5.png</Key><Code>AccessDenied</Code><Message>Access Denied</Message></Error></DeleteResult>' }];
    await expect(client.deleteObjects(['uploads/r/5.png', 'uploads/r/6.png'])).rejects.toThrow('1 of 2 objects not deleted: uploads/r/5.png (AccessDenied)');
    expect(seen).toHaveLength(1);
    expect(seen[0]!.method).toBe('POST');
    expect(seen[0]!.url).toBe('/media?delete=');
  });
});
