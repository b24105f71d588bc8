import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DeleteObjectsCommand, PutObjectCommand, S3Client } from '@aws-sdk/client-s3';
import { signDownloadUrl } from '../../shared/cdn';
import { presignPut } from '../../shared/storage/s3';
import { clock, DAY_MS } from '../../shared/clock';
import { freePort } from '../../local/net';
import { startTestRuntime, type TestRuntime } from '../support/harness';

// D60: download URLs are signed CDN URLs; the local runtime serves them under <url>/cdn and checks
// signature, path and expiry as CloudFront does. Bytes stream from the S3 emulator unchanged.
describe('download URLs on the local CDN', () => {
  let rt: TestRuntime;
  let s3: S3Client;
  const bytes = Buffer.from(Array.from({ length: 70_000 }, (_, i) => (i * 7919) % 256));

  const s3Client = (endpoint: string) =>
    new S3Client({ endpoint, forcePathStyle: true, region: 'us-east-1', credentials: { accessKeyId: 'local', secretAccessKey: 'local' }, requestChecksumCalculation: 'WHEN_REQUIRED' });

  beforeAll(async () => {
    rt = await startTestRuntime({ enablePollers: false, enableStreams: false });
    s3 = s3Client(rt.s3Endpoint);
    await s3.send(new PutObjectCommand({ Bucket: rt.bucketName, Key: 'uploads/dl/photo.jpg', Body: bytes, ContentType: 'image/jpeg' }));
  });
  afterAll(async () => {
    clock.reset();
    s3?.destroy();
    await rt?.stop();
  });
  afterEach(() => clock.reset());

  async function expectRefused(res: Response, status = 403) {
    expect(res.status).toBe(status);
    expect(res.headers.get('content-type')).toMatch(/^application\/json/);
    expect(res.headers.get('x-request-id')).toMatch(/^req_/);
    const body = (await res.json()) as { error: { type: string; message: string; request_id: string } };
    expect(body.error).toMatchObject({ type: status === 403 ? 'authorization_error' : 'not_found', message: expect.any(String) });
    expect(body.error.request_id).toBe(res.headers.get('x-request-id'));
  }

  it('a good URL downloads the exact bytes, with the stored type and as an attachment under the file name', async () => {
    const { url, expires_at } = await signDownloadUrl('uploads/dl/photo.jpg', { filename: 'storefront.jpg' });
    expect(url.startsWith(`${rt.url}/cdn/uploads/dl/photo.jpg?`)).toBe(true);
    expect(new URL(url).searchParams.get('Expires')).toBe(String(new Date(expires_at).getTime() / 1000));
    const res = await fetch(url);
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toBe('image/jpeg');
    expect(res.headers.get('content-disposition')).toBe('attachment; filename="storefront.jpg"');
    expect(Buffer.from(await res.arrayBuffer()).equals(bytes)).toBe(true);
  });

  it('a tampered signature is 403', async () => {
    const { url } = await signDownloadUrl('uploads/dl/photo.jpg');
    const sig = new URL(url).searchParams.get('Signature')!;
    await expectRefused(await fetch(url.replace(sig, sig.slice(0, -4) + (sig.endsWith('AAAA') ? 'BBBB' : 'AAAA'))));
  });

  it('an expired URL is 403', async () => {
    const { url } = await signDownloadUrl('uploads/dl/photo.jpg');
    clock.advance(7 * DAY_MS + 1000);
    await expectRefused(await fetch(url));
  });

  it('a URL still inside its 7 days downloads', async () => {
    const { url } = await signDownloadUrl('uploads/dl/photo.jpg');
    clock.advance(7 * DAY_MS - 60_000);
    expect((await fetch(url)).status).toBe(200);
  });

  it('the signature of one path used on another is 403', async () => {
    await s3.send(new PutObjectCommand({ Bucket: rt.bucketName, Key: 'uploads/dl/other.jpg', Body: Buffer.from('other'), ContentType: 'image/jpeg' }));
    const { url } = await signDownloadUrl('uploads/dl/photo.jpg');
    await expectRefused(await fetch(url.replace('/photo.jpg', '/other.jpg')));
  });

  it('a URL naming another key pair id is 403', async () => {
    const { url } = await signDownloadUrl('uploads/dl/photo.jpg');
    const id = new URL(url).searchParams.get('Key-Pair-Id')!;
    await expectRefused(await fetch(url.replace(`Key-Pair-Id=${id}`, 'Key-Pair-Id=KSOMEONEELSE')));
  });

  it('an unsigned URL is 403', async () => {
    await expectRefused(await fetch(`${rt.url}/cdn/uploads/dl/photo.jpg`));
  });

  it('a withdrawn (deleted) object answers 404 in the envelope', async () => {
    await s3.send(new PutObjectCommand({ Bucket: rt.bucketName, Key: 'uploads/dl/gone.jpg', Body: Buffer.from('x'), ContentType: 'image/jpeg' }));
    const { url } = await signDownloadUrl('uploads/dl/gone.jpg');
    await s3.send(new DeleteObjectsCommand({ Bucket: rt.bucketName, Delete: { Objects: [{ Key: 'uploads/dl/gone.jpg' }] } }));
    await expectRefused(await fetch(url), 404);
  });

  it('a byte range is served as 206', async () => {
    const { url } = await signDownloadUrl('uploads/dl/photo.jpg');
    const res = await fetch(url, { headers: { Range: 'bytes=100-199' } });
    expect(res.status).toBe(206);
    expect(Buffer.from(await res.arrayBuffer()).equals(bytes.subarray(100, 200))).toBe(true);
  });
});

describe('signed URLs survive a restart of the local runtime', () => {
  it('download and pre-signed upload URLs handed out before a stop still work after a start on the same data folder and port', async () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'dl-restart-'));
    const port = await freePort('127.0.0.1');
    try {
      let rt = await startTestRuntime({ inMemory: false, dataDir, port, enablePollers: false, enableStreams: false });
      const s3 = new S3Client({ endpoint: rt.s3Endpoint, forcePathStyle: true, region: 'us-east-1', credentials: { accessKeyId: 'local', secretAccessKey: 'local' } });
      await s3.send(new PutObjectCommand({ Bucket: rt.bucketName, Key: 'uploads/keep/a.png', Body: Buffer.from('png bytes'), ContentType: 'image/png' }));
      s3.destroy();
      const { url } = await signDownloadUrl('uploads/keep/a.png');
      const upload = await presignPut('uploads/keep/b.png', 'image/png', 9);
      await rt.stop();

      rt = await startTestRuntime({ inMemory: false, dataDir, port, enablePollers: false, enableStreams: false });
      try {
        const res = await fetch(url);
        expect(res.status).toBe(200);
        expect(await res.text()).toBe('png bytes');
        // A pre-signed upload URL handed out before the stop is still honoured (same S3 port).
        expect((await fetch(upload.url, { method: 'PUT', body: 'png again', headers: upload.headers })).status).toBe(200);
      } finally {
        await rt.stop();
      }
    } finally {
      rmSync(dataDir, { recursive: true, force: true });
    }
  });
});
