import { request } from 'node:http';
import {
  CompleteMultipartUploadCommand,
  CreateMultipartUploadCommand,
  DeleteObjectCommand,
  GetObjectCommand,
  GetObjectTaggingCommand,
  HeadObjectCommand,
  ListObjectsV2Command,
  PutObjectCommand,
  PutObjectTaggingCommand,
  S3Client,
  UploadPartCommand,
} from '@aws-sdk/client-s3';
import { getSignedUrl } from '@aws-sdk/s3-request-presigner';
import { mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { S3_LOCAL_CREDENTIALS } from '../../local/s3';
import { removeCutOffWrites } from '../../local/s3-store';
import { startTestRuntime, type TestRuntime } from '../support/harness';

// S3 shows an object only once its PUT succeeded, never a part of one; a PUT cut off midway
// stores nothing; an object being replaced reads as the old one until the new one is whole.
// s3rver wrote a PUT's bytes straight into the object's file (local/s3-store.ts).
describe('local S3: an object is stored whole, or not at all', () => {
  let rt: TestRuntime;
  let s3: S3Client;

  beforeAll(async () => {
    rt = await startTestRuntime({ enablePollers: false, enableStreams: false });
    s3 = new S3Client({ endpoint: rt.s3Endpoint, forcePathStyle: true, region: 'us-east-1', credentials: S3_LOCAL_CREDENTIALS, requestChecksumCalculation: 'WHEN_REQUIRED' });
  });
  afterAll(async () => {
    s3?.destroy();
    await rt?.stop();
  });

  const size = 256 * 1024;
  const bytes = (fill: number) => Buffer.alloc(size, fill);
  const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
  const filesUnder = (dir: string): string[] =>
    readdirSync(dir, { withFileTypes: true, recursive: true })
      .filter((e) => e.isFile())
      .map((e) => join(e.parentPath ?? e.path, e.name));

  /** A pre-signed PUT whose first half is sent now; `rest()` sends the second half, `cut()` drops the connection. */
  async function slowPut(key: string, body: Buffer) {
    const url = new URL(await getSignedUrl(s3, new PutObjectCommand({ Bucket: rt.bucketName, Key: key, ContentType: 'image/jpeg' }), { expiresIn: 300 }));
    let answered!: (status: number) => void;
    const status = new Promise<number>((r) => (answered = r));
    const req = request(url, { method: 'PUT', headers: { 'Content-Type': 'image/jpeg', 'Content-Length': String(body.length) } }, (res) => {
      res.resume();
      answered(res.statusCode ?? 0);
    });
    req.on('error', () => answered(0));
    req.write(body.subarray(0, body.length / 2));
    await sleep(300); // the first half has reached the emulator
    return {
      rest: async () => {
        req.end(body.subarray(body.length / 2));
        return status;
      },
      cut: () => req.destroy(),
    };
  }
  const head = (key: string) =>
    s3.send(new HeadObjectCommand({ Bucket: rt.bucketName, Key: key })).then(
      (r) => r.ContentLength,
      (e: { $metadata?: { httpStatusCode?: number } }) => (e.$metadata?.httpStatusCode === 404 ? null : Promise.reject(e)),
    );
  const read = async (key: string) => Buffer.from(await (await s3.send(new GetObjectCommand({ Bucket: rt.bucketName, Key: key }))).Body!.transformToByteArray());

  it('an object being uploaded does not exist until its PUT succeeds, then has all its bytes', async () => {
    const key = 'uploads/sub_writes/r1/a.jpg';
    const put = await slowPut(key, bytes(1));
    expect(await head(key)).toBeNull();
    expect(await put.rest()).toBe(200);
    expect(await head(key)).toBe(size);
    expect((await read(key)).equals(bytes(1))).toBe(true);
  });

  it('an upload cut off midway stores nothing, lists nothing and leaves no file behind', async () => {
    const key = 'uploads/sub_writes/r1/b.jpg';
    const put = await slowPut(key, bytes(2));
    put.cut();
    await sleep(300);
    expect(await head(key)).toBeNull();
    const listed = await s3.send(new ListObjectsV2Command({ Bucket: rt.bucketName, Prefix: 'uploads/sub_writes/r1/b' }));
    expect(listed.KeyCount).toBe(0);
    expect(filesUnder(rt.s3Directory).filter((f) => f.includes('b.jpg'))).toEqual([]);
  });

  it('the temporary files of writes a crash cut off are removed at the next start, and the objects they were to replace are whole', async () => {
    const dir = mkdtempSync(join(tmpdir(), 's3-partial-'));
    try {
      mkdirSync(join(dir, 'bucket', 'uploads'), { recursive: true });
      writeFileSync(join(dir, 'bucket', 'uploads', 'x.jpg._S3rver_object.1234.partial'), 'half');
      writeFileSync(join(dir, 'bucket', 'uploads', 'x.jpg._S3rver_metadata.json.5678.partial'), '{');
      expect(await removeCutOffWrites(dir)).toBe(2);
      expect(filesUnder(dir)).toEqual([]);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('an object being replaced reads as the old one until the new one is whole', async () => {
    const key = 'uploads/sub_writes/r1/c.jpg';
    await s3.send(new PutObjectCommand({ Bucket: rt.bucketName, Key: key, Body: bytes(3), ContentType: 'image/jpeg' }));
    const put = await slowPut(key, bytes(4));
    expect((await read(key)).equals(bytes(3))).toBe(true);
    expect(await put.rest()).toBe(200);
    expect((await read(key)).equals(bytes(4))).toBe(true);
  });

  it('a replacement cut off midway leaves the old object', async () => {
    const key = 'uploads/sub_writes/r1/d.jpg';
    await s3.send(new PutObjectCommand({ Bucket: rt.bucketName, Key: key, Body: bytes(5), ContentType: 'image/jpeg' }));
    const put = await slowPut(key, bytes(6));
    put.cut();
    await sleep(300);
    expect((await read(key)).equals(bytes(5))).toBe(true);
  });

  // S3 gives an object its tags when it is written and deletes them with it. s3rver kept a key's
  // tag file across a PUT and a delete, so an object written again kept the tags of the one it
  // replaced (the verdict tag the bucket's lifecycle rule reads, D71).
  describe('an object written again has only the tags of its own write', () => {
    const putObject = (key: string, body: string | Buffer) => s3.send(new PutObjectCommand({ Bucket: rt.bucketName, Key: key, Body: body, ContentType: 'image/jpeg' }));
    const tag = (key: string) => s3.send(new PutObjectTaggingCommand({ Bucket: rt.bucketName, Key: key, Tagging: { TagSet: [{ Key: 'verdict', Value: 'rejected' }] } }));
    const tags = async (key: string) => (await s3.send(new GetObjectTaggingCommand({ Bucket: rt.bucketName, Key: key }))).TagSet ?? [];

    it('a tagged object keeps its tags until it is written again', async () => {
      await putObject('keyframes/sub_tags/r1/a.jpg', 'one');
      await tag('keyframes/sub_tags/r1/a.jpg');
      expect(await tags('keyframes/sub_tags/r1/a.jpg')).toEqual([{ Key: 'verdict', Value: 'rejected' }]);
    });

    it('a PUT over a tagged object leaves the new object untagged', async () => {
      await putObject('keyframes/sub_tags/r1/b.jpg', 'one');
      await tag('keyframes/sub_tags/r1/b.jpg');
      await putObject('keyframes/sub_tags/r1/b.jpg', 'two');
      expect(await tags('keyframes/sub_tags/r1/b.jpg')).toEqual([]);
    });

    it('a multipart upload completed over a tagged object leaves the new object untagged', async () => {
      await putObject('exports/exp_tags/1/c.jsonl', 'one');
      await tag('exports/exp_tags/1/c.jsonl');
      const target = { Bucket: rt.bucketName, Key: 'exports/exp_tags/1/c.jsonl' };
      const { UploadId } = await s3.send(new CreateMultipartUploadCommand(target));
      const { ETag } = await s3.send(new UploadPartCommand({ ...target, UploadId, PartNumber: 1, Body: 'two' }));
      await s3.send(new CompleteMultipartUploadCommand({ ...target, UploadId, MultipartUpload: { Parts: [{ ETag, PartNumber: 1 }] } }));
      expect(await tags('exports/exp_tags/1/c.jsonl')).toEqual([]);
    });

    it('an object deleted and written again starts with no tags', async () => {
      await putObject('uploads/sub_tags/r1/d.jpg', 'one');
      await tag('uploads/sub_tags/r1/d.jpg');
      await s3.send(new DeleteObjectCommand({ Bucket: rt.bucketName, Key: 'uploads/sub_tags/r1/d.jpg' }));
      await putObject('uploads/sub_tags/r1/d.jpg', 'two');
      expect(await tags('uploads/sub_tags/r1/d.jpg')).toEqual([]);
    });
  });
});
