/**
 * A duplicate delivery of a video's annotation message (SQS delivers at least once, D54) that runs
 * alongside the first one stores the video's keyframes again, after the verdict rejected the video
 * and tagged them `verdict=rejected`. On S3 a PutObject replaces the object's tags (a PUT with no
 * tagging leaves the object untagged), so the annotation stage tags what it stored again; the
 * keyframes must end tagged for the bucket's lifecycle rule, never kept for ever.
 *
 * The consumers run here by hand (pollers off), and the duplicate's keyframe writes are held until
 * the first delivery has taken the verdict, to interleave the two runs exactly. The local S3
 * emulator drops an object's tags when it is written again, as S3 does (local/s3.ts).
 */
import { GetObjectTaggingCommand, ListObjectsV2Command, S3Client } from '@aws-sdk/client-s3';
import type { SQSClient } from '@aws-sdk/client-sqs';
import type { SQSEvent } from 'aws-lambda';
import { S3_LOCAL_CREDENTIALS } from '../../local/s3';
import { startTestRuntime, waitFor, type TestRuntime } from '../support/harness';
import { BedrockScorer } from '../../shared/scoring';
import { setScorerFactory } from '../../shared/work/scoring-stage';
import { ObjectClient } from '../../shared/storage/object-client';
import { parseUploadKey } from '../../shared/storage/s3';
import { videoFixtures } from '../fixtures/media';
import { accept, createJob, liveBuyer, queueClient, signupWorker, sqsRecord, takeMessage, uploadFile, converseReply as reply } from './support';

type Consumer = (e: SQSEvent) => Promise<{ batchItemFailures: { itemIdentifier: string }[] }>;

describe('pipeline: keyframes a duplicate annotation delivery stores again over a rejected video', () => {
  let rt: TestRuntime;
  let s3: S3Client;
  let sqs: SQSClient;
  let score: Consumer;
  let annotate: Consumer;

  /** Keyframe writes held until the test lets them go. */
  let holding = false;
  let held: { key: string; go(): void }[] = [];
  let putSpy: jest.SpyInstance | undefined;

  beforeAll(async () => {
    process.env.LOCAL_FIXED_OTP = '123456';
    rt = await startTestRuntime({ enablePollers: false });
    s3 = new S3Client({ endpoint: rt.s3Endpoint, forcePathStyle: true, region: 'us-east-1', credentials: S3_LOCAL_CREDENTIALS, requestChecksumCalculation: 'WHEN_REQUIRED' });
    sqs = queueClient(rt);
    score = (await import('../../functions/pipeline/score')).handler as never;
    annotate = (await import('../../functions/pipeline/annotate')).handler as never;
    const original = ObjectClient.prototype.putObject;
    putSpy = jest.spyOn(ObjectClient.prototype, 'putObject').mockImplementation(function (this: ObjectClient, ...args: Parameters<ObjectClient['putObject']>) {
      const put = () => original.apply(this, args);
      if (!holding || !args[0].startsWith('keyframes/')) return put();
      return new Promise<void>((resolve, reject) => {
        held.push({ key: args[0], go: () => void put().then(resolve, reject) });
      });
    });
  });
  afterEach(() => {
    setScorerFactory(null);
    holding = false;
    for (const h of held) h.go();
    held = [];
  });
  afterAll(async () => {
    putSpy?.mockRestore();
    s3?.destroy();
    sqs?.destroy();
    await rt?.stop();
  });

  /** The `verdict` tag of each keyframe of the file (undefined where it has none), by key. */
  async function keyframeTags(fileId: string): Promise<Record<string, string | undefined>> {
    const listed = await s3.send(new ListObjectsV2Command({ Bucket: rt.bucketName, Prefix: `keyframes/${fileId}/` }));
    const keys = (listed.Contents ?? []).map((o) => o.Key!);
    const tags = await Promise.all(keys.map(async (Key) => ((await s3.send(new GetObjectTaggingCommand({ Bucket: rt.bucketName, Key }))).TagSet ?? []).find((t) => t.Key === 'verdict')?.Value));
    return Object.fromEntries(keys.map((k, i) => [k, tags[i]]));
  }

  it('a rejected video whose annotation message is delivered twice ends with every keyframe tagged verdict=rejected, those the duplicate stored again included', async () => {
    setScorerFactory(() => new BedrockScorer({ client: { converse: async () => reply('{"relevance": 1, "quality": 2, "instruction_compliance": 1, "reasoning": "Not what the job asks for."}') } }));
    const b = await liveBuyer(rt);
    const job = await createJob(rt, b.live, { files_needed: 1, accepted_formats: ['video/mp4'], price_per_file_cents: 40 });
    const w = await signupWorker(rt);
    const a = await accept(rt, w.token, job.id);
    const subId = a.json.id as string;
    expect((await uploadFile(rt, w.token, subId, await videoFixtures.mp4(2), 'video/mp4', 'clip.mp4')).status).toBe(202);
    const scoringBody = await takeMessage(rt, sqs, 'scoring', subId);
    const annotationBody = await takeMessage(rt, sqs, 'annotation', subId);
    const fileId = parseUploadKey(JSON.parse(annotationBody).detail.object.key)!.fileId;
    const status = async () => (await rt.request('GET', `/internal/worker/submissions/${subId}`, { key: w.token })).json.status;

    // Scored first (the model rejects); the verdict waits for the annotation.
    expect((await score({ Records: [sqsRecord(scoringBody, 's1')] })).batchItemFailures).toEqual([]);
    expect(await status()).toBe('pending_score');

    // The duplicate delivery starts first and gets as far as storing its keyframes (held there).
    holding = true;
    const duplicate = annotate({ Records: [sqsRecord(annotationBody, 'a2')] });
    await waitFor(() => held.length > 0, { timeoutMs: 60_000, intervalMs: 100 });
    holding = false;

    // The first delivery stores its keyframes and the annotation: the verdict rejects the video and tags them.
    expect((await annotate({ Records: [sqsRecord(annotationBody, 'a1')] })).batchItemFailures).toEqual([]);
    expect(await status()).toBe('rejected');
    const afterVerdict = await keyframeTags(fileId);
    expect(Object.keys(afterVerdict).length).toBeGreaterThan(0);
    expect(Object.values(afterVerdict).every((v) => v === 'rejected')).toBe(true);

    // Then the duplicate's writes land over them (leaving them untagged), and its run ends.
    const stored = held.map((h) => h.key).sort();
    expect(stored).toEqual(Object.keys(afterVerdict).sort());
    for (const h of held.splice(0)) h.go();
    expect((await duplicate).batchItemFailures).toEqual([]);

    expect(await keyframeTags(fileId)).toEqual(Object.fromEntries(stored.map((k) => [k, 'rejected'])));
    expect(await status()).toBe('rejected');
  });
});
