import {
  CompleteMultipartUploadCommand,
  CreateMultipartUploadCommand,
  DeleteObjectCommand,
  GetObjectTaggingCommand,
  PutObjectCommand,
  PutObjectTaggingCommand,
  S3Client,
  UploadPartCommand,
} from '@aws-sdk/client-s3';
import { S3_LOCAL_CREDENTIALS } from '../../local/s3';
import { startTestRuntime, type TestRuntime } from '../support/harness';

// S3 gives an object its tags when it is written and deletes them with it. s3rver kept a key's tag
// file across a PUT and a delete, so an object written again kept the tags of the one it replaced
// (the verdict tag the bucket's lifecycle rule reads, D71): the local S3 now answers as S3 does.
describe('local S3: an object written again has only the tags of its own write', () => {
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

  const put = (key: string, body: string | Buffer) => s3.send(new PutObjectCommand({ Bucket: rt.bucketName, Key: key, Body: body, ContentType: 'image/jpeg' }));
  const tag = (key: string) => s3.send(new PutObjectTaggingCommand({ Bucket: rt.bucketName, Key: key, Tagging: { TagSet: [{ Key: 'verdict', Value: 'rejected' }] } }));
  const tags = async (key: string) => (await s3.send(new GetObjectTaggingCommand({ Bucket: rt.bucketName, Key: key }))).TagSet ?? [];

  it('a tagged object keeps its tags until it is written again', async () => {
    await put('keyframes/sub_tags/r1/a.jpg', 'one');
    await tag('keyframes/sub_tags/r1/a.jpg');
    expect(await tags('keyframes/sub_tags/r1/a.jpg')).toEqual([{ Key: 'verdict', Value: 'rejected' }]);
  });

  it('a PUT over a tagged object leaves the new object untagged', async () => {
    await put('keyframes/sub_tags/r1/b.jpg', 'one');
    await tag('keyframes/sub_tags/r1/b.jpg');
    await put('keyframes/sub_tags/r1/b.jpg', 'two');
    expect(await tags('keyframes/sub_tags/r1/b.jpg')).toEqual([]);
  });

  it('a multipart upload completed over a tagged object leaves the new object untagged', async () => {
    await put('exports/exp_tags/1/c.jsonl', 'one');
    await tag('exports/exp_tags/1/c.jsonl');
    const target = { Bucket: rt.bucketName, Key: 'exports/exp_tags/1/c.jsonl' };
    const { UploadId } = await s3.send(new CreateMultipartUploadCommand(target));
    const { ETag } = await s3.send(new UploadPartCommand({ ...target, UploadId, PartNumber: 1, Body: 'two' }));
    await s3.send(new CompleteMultipartUploadCommand({ ...target, UploadId, MultipartUpload: { Parts: [{ ETag, PartNumber: 1 }] } }));
    expect(await tags('exports/exp_tags/1/c.jsonl')).toEqual([]);
  });

  it('an object deleted and written again starts with no tags', async () => {
    await put('uploads/sub_tags/r1/d.jpg', 'one');
    await tag('uploads/sub_tags/r1/d.jpg');
    await s3.send(new DeleteObjectCommand({ Bucket: rt.bucketName, Key: 'uploads/sub_tags/r1/d.jpg' }));
    await put('uploads/sub_tags/r1/d.jpg', 'two');
    expect(await tags('uploads/sub_tags/r1/d.jpg')).toEqual([]);
  });
});
