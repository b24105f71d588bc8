import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { SQSClient } from '@aws-sdk/client-sqs';
import type { SQSEvent } from 'aws-lambda';
import { startTestRuntime, waitFor, type TestRuntime, indexesCaughtUp } from '../support/harness';
import type { ScoreResult } from '../../shared/scoring/types';
import { accept, createJob, detailedJpeg, liveBuyer, queueClient, signupWorker, sqsRecord, takeMessage, uploadFile } from './support';

// Honest verdicts: every verdict carries its reason codes as an array, and a file is approved only
// with the annotations the annotation stage computed. A file whose bytes do not decode for its
// annotations is rejected as unreadable media, never delivered with annotations null; a tool that
// cannot run is no verdict on the bytes. Consumers run by hand, in the order each case needs.
describe('verdicts are honest: reason codes always an array, no File without its annotations', () => {
  let rt: TestRuntime;
  let sqs: SQSClient;
  let dir: string;
  type Consumer = (e: SQSEvent) => Promise<{ batchItemFailures: { itemIdentifier: string }[] }>;
  let score: Consumer;
  let annotate: Consumer;

  beforeAll(async () => {
    process.env.LOCAL_FIXED_OTP = '123456';
    dir = mkdtempSync(join(tmpdir(), 'verdict-honesty-'));
    rt = await startTestRuntime({ enablePollers: false });
    sqs = queueClient(rt);
    score = (await import('../../functions/pipeline/score')).handler as never;
    annotate = (await import('../../functions/pipeline/annotate')).handler as never;
  });
  afterEach(async () => {
    delete process.env.FFMPEG_PATH;
    (await import('../../shared/work/scoring-stage')).setScorerFactory(null);
  });
  afterAll(async () => {
    sqs?.destroy();
    await rt?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  /**
   * An MP4 whose header reads (ffprobe: 640×480, 2 s, H.264) but whose frames do not decode: the
   * media data is zeroed, so ffmpeg exits with "Invalid data found when processing input".
   */
  function videoWithUndecodableFrames(): Buffer {
    const file = join(dir, 'clip.mp4');
    execFileSync('ffmpeg', ['-hide_banner', '-loglevel', 'error', '-y', '-f', 'lavfi', '-i', 'testsrc=size=640x480:rate=25:duration=2', '-c:v', 'libx264', '-pix_fmt', 'yuv420p', '-movflags', '+faststart', file]);
    const bytes = readFileSync(file);
    const mdat = bytes.indexOf('mdat');
    bytes.fill(0, mdat + 4);
    return bytes;
  }

  /** A provider that judged the file worth approving (4 stars on every dimension). */
  async function providerApproves() {
    const approving: ScoreResult = { ai_star_rating: 4, dimensions: { relevance: 4, quality: 4, instruction_compliance: 4 }, ai_reasoning: 'A steady clip of the requested scene.', provider: 'bedrock', model: 'test', reason_codes: [] };
    (await import('../../shared/work/scoring-stage')).setScorerFactory(() => ({ name: 'bedrock', score: async () => approving }));
  }

  async function uploaded(bytes: Buffer, contentType: string, filename: string, over: Record<string, unknown> = {}) {
    const buyer = await liveBuyer(rt);
    const job = await createJob(rt, buyer.live, { files_needed: 1, ...over });
    const w = await signupWorker(rt);
    const sub = (await accept(rt, w.token, job.id)).json.id as string;
    expect((await uploadFile(rt, w.token, sub, bytes, contentType, filename)).status).toBe(202);
    return { buyer, job, w, sub, bodies: { scoring: await takeMessage(rt, sqs, 'scoring', sub), annotation: await takeMessage(rt, sqs, 'annotation', sub) } };
  }
  type Uploaded = Awaited<ReturnType<typeof uploaded>>;

  const eventFor = (key: string, type: string, subId: string) =>
    waitFor(async () => ((await rt.request('GET', `/v1/webhook_events?type=${type}&limit=100`, { key })).json?.data ?? []).find((e: { data?: { submission_id?: string } }) => e.data?.submission_id === subId) ?? null, { timeoutMs: 30_000, intervalMs: 500 });

  async function expectNothingDeliveredOrCharged(t: Uploaded) {
    await indexesCaughtUp(); // both lists read indexes: nothing written is left out
    expect((await rt.request('GET', `/v1/jobs/${t.job.id}/files?min_score=1`, { key: t.buyer.live })).json.data).toEqual([]);
    expect((await rt.request('GET', '/v1/billing/transactions?type=deduction&limit=100', { key: t.buyer.live })).json.data).toEqual([]);
  }

  it('every verdict carries reason_codes as an array: a file its score would approve after its job stopped taking files is rejected with [], the reasoning saying why', async () => {
    const t = await uploaded(await detailedJpeg(901), 'image/jpeg', 'shop.jpg');
    expect((await rt.request('POST', `/v1/jobs/${t.job.id}/cancel`, { key: t.buyer.live, headers: { 'Idempotency-Key': `cancel-${t.sub}` } })).status).toBe(200);
    // The cancellation's own consumer is not polled: the verdict meets the job that takes no more files.
    expect((await score({ Records: [sqsRecord(t.bodies.scoring, 's')] })).batchItemFailures).toEqual([]);
    expect((await annotate({ Records: [sqsRecord(t.bodies.annotation, 'a')] })).batchItemFailures).toEqual([]);
    const buyerView = (await rt.request('GET', `/v1/submissions/${t.sub}`, { key: t.buyer.live })).json;
    expect(buyerView).toMatchObject({ status: 'rejected', reason_codes: [], ai_reasoning: expect.stringContaining('no longer takes files') });
    expect(buyerView.ai_star_rating).toBeGreaterThanOrEqual(3); // the model's rating stays: it judged the file
    expect((await rt.request('GET', `/internal/worker/submissions/${t.sub}`, { key: t.w.token })).json).toMatchObject({ status: 'rejected', reason_codes: [] });
    expect((await eventFor(t.buyer.live, 'submission.scored', t.sub)).data).toMatchObject({ status: 'rejected', reason_codes: [] });
    expect((await eventFor(t.buyer.live, 'submission.rejected', t.sub)).data).toMatchObject({ reason_codes: [] });
  });

  it('a video whose frames do not decode is rejected as unreadable_media with 1 star, though its provider would approve it: no File, no charge, annotations null', async () => {
    await providerApproves();
    const t = await uploaded(videoWithUndecodableFrames(), 'video/mp4', 'clip.mp4', { accepted_formats: ['video/mp4'], price_per_file_cents: 50, max_duration_seconds: 10 });
    expect((await score({ Records: [sqsRecord(t.bodies.scoring, 's')] })).batchItemFailures).toEqual([]);
    expect((await annotate({ Records: [sqsRecord(t.bodies.annotation, 'a')] })).batchItemFailures).toEqual([]);
    const worker = (await rt.request('GET', `/internal/worker/submissions/${t.sub}`, { key: t.w.token })).json;
    expect(worker).toMatchObject({ status: 'rejected', ai_star_rating: 1, dimensions: null, reason_codes: ['unreadable_media'], payout_cents: null });
    expect(worker.ai_reasoning).toMatch(/could not be decoded/);
    expect((await eventFor(t.buyer.live, 'submission.scored', t.sub)).data).toMatchObject({ status: 'rejected', reason_codes: ['unreadable_media'], annotations: null });
    expect((await eventFor(t.buyer.live, 'submission.rejected', t.sub)).data).toMatchObject({ reason_codes: ['unreadable_media'] });
    await expectNothingDeliveredOrCharged(t);
    // Nothing to deliver with its annotations: the buyer cannot approve it by override either.
    const o = await rt.request('POST', `/v1/submissions/${t.sub}/override`, { key: t.buyer.live, headers: { 'Idempotency-Key': `ov-${t.sub}` }, body: { decision: 'approve', reason_code: 'other' } });
    expect([o.status, o.json.error?.details?.[0]?.code]).toEqual([409, 'invalid_state']);
    await expectNothingDeliveredOrCharged(t);
  });

  it('an annotation tool that cannot run is no verdict on the bytes: the step fails (retried, then dead-lettered), nothing is recorded and the submission stays pending_score', async () => {
    await providerApproves();
    const t = await uploaded(videoWithUndecodableFrames(), 'video/mp4', 'clip.mp4', { accepted_formats: ['video/mp4'], price_per_file_cents: 50, max_duration_seconds: 10 });
    expect((await score({ Records: [sqsRecord(t.bodies.scoring, 's')] })).batchItemFailures).toEqual([]);
    process.env.FFMPEG_PATH = join(dir, 'no-such-ffmpeg'); // ENOENT when it is started
    expect((await annotate({ Records: [sqsRecord(t.bodies.annotation, 'a1')] })).batchItemFailures).toHaveLength(1);
    const { getSubmissionItem } = await import('../../shared/work/reservations');
    const item = (await getSubmissionItem(t.sub))!;
    expect(item.status).toBe('pending_score');
    expect(item.parts[item.uploads[0]!.file_id]).not.toHaveProperty('annotations');
    expect(item.parts[item.uploads[0]!.file_id]).not.toHaveProperty('annotation_error');
    // The tool is back: the redelivered message decides on what the bytes are.
    delete process.env.FFMPEG_PATH;
    expect((await annotate({ Records: [sqsRecord(t.bodies.annotation, 'a2')] })).batchItemFailures).toEqual([]);
    expect((await rt.request('GET', `/internal/worker/submissions/${t.sub}`, { key: t.w.token })).json).toMatchObject({ status: 'rejected', reason_codes: ['unreadable_media'] });
    await expectNothingDeliveredOrCharged(t);
  });
});
