/**
 * A rejected video's keyframes (`keyframes/<file>/…`, stored by the annotation stage) are tagged
 * `verdict=rejected` with its bytes, so the bucket's lifecycle rule deletes them too; an override
 * that approves the video tags them `approved` again, as its bytes. Keyframes were kept forever.
 */
import { GetObjectTaggingCommand, ListObjectsV2Command, S3Client } from '@aws-sdk/client-s3';
import { S3_LOCAL_CREDENTIALS } from '../../local/s3';
import { startTestRuntime, waitFor, type TestRuntime, indexesCaughtUp } from '../support/harness';
import { BedrockScorer } from '../../shared/scoring';
import { setScorerFactory } from '../../shared/work/scoring-stage';
import { videoFixtures } from '../fixtures/media';
import { clock, HOUR_MS } from '../../shared/clock';
import { handler as sweep } from '../../functions/scheduled/reservation-sweep';
import { accept, createJob, liveBuyer, signupWorker, uploadFile, waitForVerdict, converseReply as reply } from './support';


describe('pipeline: the keyframes of a rejected video are tagged for the lifecycle rule', () => {
  let rt: TestRuntime;
  let s3: S3Client;
  beforeAll(async () => {
    process.env.LOCAL_FIXED_OTP = '123456';
    rt = await startTestRuntime();
    s3 = new S3Client({ endpoint: rt.s3Endpoint, forcePathStyle: true, region: 'us-east-1', credentials: S3_LOCAL_CREDENTIALS, requestChecksumCalculation: 'WHEN_REQUIRED' });
  });
  afterEach(() => setScorerFactory(null));
  afterAll(async () => {
    s3?.destroy();
    await rt?.stop();
  });

  /** The tags of every keyframe of the file, once it has at least one. */
  const keyframeTags = (fileId: string, want: string) =>
    waitFor(
      async () => {
        const listed = await s3.send(new ListObjectsV2Command({ Bucket: rt.bucketName, Prefix: `keyframes/${fileId}/` }));
        const keys = (listed.Contents ?? []).map((o) => o.Key!);
        if (!keys.length) return null;
        const tags = await Promise.all(keys.map(async (Key) => Object.fromEntries(((await s3.send(new GetObjectTaggingCommand({ Bucket: rt.bucketName, Key }))).TagSet ?? []).map((t) => [t.Key!, t.Value!]))));
        return tags.every((t) => t.verdict === want) ? tags : null;
      },
      { timeoutMs: 60_000, intervalMs: 500 },
    );

  async function videoSubmission(over: Record<string, unknown>) {
    const b = await liveBuyer(rt);
    const job = await createJob(rt, b.live, { files_needed: 1, accepted_formats: ['video/mp4'], price_per_file_cents: 40, ...over });
    const w = await signupWorker(rt);
    const a = await accept(rt, w.token, job.id);
    expect((await uploadFile(rt, w.token, a.json.id, await videoFixtures.mp4(2), 'video/mp4', 'clip.mp4')).status).toBe(202);
    const v = await waitForVerdict(rt, w.token, a.json.id);
    return { b, subId: a.json.id as string, verdict: v, fileId: v.files[0].file_id as string };
  }

  it('a video the model rejects after its annotation: its keyframes are tagged verdict=rejected; an override approval tags them approved', async () => {
    setScorerFactory(() => new BedrockScorer({ client: { converse: async () => reply('{"relevance": 1, "quality": 2, "instruction_compliance": 1, "reasoning": "Not what the job asks for."}') } }));
    const t = await videoSubmission({});
    expect(t.verdict.status).toBe('rejected');
    expect((await keyframeTags(t.fileId, 'rejected')).length).toBeGreaterThan(0);
    const o = await rt.request('POST', `/v1/submissions/${t.subId}/override`, { key: t.b.live, headers: { 'Idempotency-Key': `ov-${t.subId}` }, body: { decision: 'approve', reason_code: 'other' } });
    expect(o.status).toBe(200);
    expect((await keyframeTags(t.fileId, 'approved')).length).toBeGreaterThan(0);
  });

  it('a video whose retry window ends unused (its first verdict, retry_pending, becomes final): its keyframes are tagged verdict=rejected', async () => {
    setScorerFactory(() => new BedrockScorer({ client: { converse: async () => reply('{"relevance": 2, "quality": 2, "instruction_compliance": 2, "reasoning": "Close, but not quite."}') } }));
    const t = await videoSubmission({});
    expect(t.verdict.status).toBe('retry_pending');
    await waitFor(async () => (await s3.send(new ListObjectsV2Command({ Bucket: rt.bucketName, Prefix: `keyframes/${t.fileId}/` }))).KeyCount! > 0, { timeoutMs: 30_000, intervalMs: 300 });
    clock.advance(HOUR_MS + 60_000);
    await indexesCaughtUp(); // the sweep is scheduled, minutes after these writes, and reads an index
    try {
      expect((await sweep({} as never)).released).toBeGreaterThanOrEqual(1);
    } finally {
      clock.reset();
    }
    expect((await keyframeTags(t.fileId, 'rejected')).length).toBeGreaterThan(0);
  });

  it('a video a pre-check rejects before its annotation is done: the keyframes stored after the verdict are tagged verdict=rejected', async () => {
    const t = await videoSubmission({ min_duration_seconds: 10 });
    expect(t.verdict).toMatchObject({ status: 'rejected', reason_codes: ['duration_out_of_bounds'] });
    expect((await keyframeTags(t.fileId, 'rejected')).length).toBeGreaterThan(0);
  });
});
