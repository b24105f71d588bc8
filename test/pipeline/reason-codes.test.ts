import { startTestRuntime, waitFor, type TestRuntime, indexesCaughtUp } from '../support/harness';
import { setNsfwModel, type NsfwModel } from '../../shared/media/annotation/models';
import { accept, createJob, detailedJpeg, flatPng, liveBuyer, signupWorker, uploadFile, waitForVerdict } from './support';

// D68 reason codes on every verdict path, read the way integrators read them: the buyer's view of
// the submission, the worker's view, and the submission.scored / submission.rejected events.
// D67 policy violations through the whole pipeline, with a provider stub behind the NSFW model
// interface standing in for nsfwjs's score.
describe('pipeline: every verdict explains itself with reason codes', () => {
  let rt: TestRuntime;
  beforeAll(async () => {
    process.env.LOCAL_FIXED_OTP = '123456';
    rt = await startTestRuntime();
  });
  afterAll(async () => {
    setNsfwModel(null);
    await rt?.stop();
  });

  const verdictOf = (token: string, subId: string) => waitForVerdict(rt, token, subId, 90_000);
  const eventFor = (key: string, type: string, subId: string) =>
    waitFor(
      async () => {
        const list = (await rt.request('GET', `/v1/webhook_events?type=${type}&limit=100`, { key })).json?.data ?? [];
        return list.find((e: any) => e.data?.submission_id === subId) ?? null;
      },
      { timeoutMs: 30_000, intervalMs: 500 },
    );
  const buyerView = async (key: string, subId: string) => (await rt.request('GET', `/v1/submissions/${subId}`, { key })).json;

  /** Upload one file for a fresh worker on `job`, wait for the verdict; the three readings of it. */
  async function verdictFor(buyerKey: string, jobId: string, bytes: Buffer, type = 'image/jpeg', name = 'photo.jpg') {
    const w = await signupWorker(rt);
    const a = await accept(rt, w.token, jobId);
    expect((await uploadFile(rt, w.token, a.json.id, bytes, type, name)).status).toBe(202);
    const worker = await verdictOf(w.token, a.json.id);
    return { worker, buyer: await buyerView(buyerKey, a.json.id), subId: a.json.id as string };
  }

  it('approved: reason_codes [] in the buyer view, the worker view and submission.scored', async () => {
    const b = await liveBuyer(rt);
    const job = await createJob(rt, b.live, { files_needed: 2 });
    const v = await verdictFor(b.live, job.id, await detailedJpeg(101));
    expect(v.worker).toMatchObject({ status: 'approved', reason_codes: [] });
    expect(v.buyer).toMatchObject({ status: 'approved', reason_codes: [] });
    expect((await eventFor(b.live, 'submission.scored', v.subId)).data).toMatchObject({ status: 'approved', reason_codes: [] });
  });

  it('a flat image is rejected for low relevance and low quality, everywhere', async () => {
    const b = await liveBuyer(rt);
    const job = await createJob(rt, b.live, { files_needed: 1 });
    const v = await verdictFor(b.live, job.id, await flatPng(), 'image/png', 'flat.png');
    const codes = ['low_relevance', 'low_quality'];
    expect(v.worker).toMatchObject({ status: 'rejected', reason_codes: codes });
    expect(v.buyer).toMatchObject({ status: 'rejected', reason_codes: codes });
    expect((await eventFor(b.live, 'submission.scored', v.subId)).data).toMatchObject({ status: 'rejected', reason_codes: codes });
    expect((await eventFor(b.live, 'submission.rejected', v.subId)).data).toMatchObject({ reason_codes: codes });
  });

  it('retry_pending names what to fix (a flat image under threshold 2)', async () => {
    const b = await liveBuyer(rt);
    const job = await createJob(rt, b.live, { files_needed: 1, min_star_rating: 2 });
    const v = await verdictFor(b.live, job.id, await flatPng(320, 240, { r: 10, g: 90, b: 200 }), 'image/png', 'flat.png');
    expect(v.worker).toMatchObject({ status: 'retry_pending', reason_codes: ['low_relevance', 'low_quality'] });
    expect((await eventFor(b.live, 'submission.scored', v.subId)).data).toMatchObject({ status: 'retry_pending', reason_codes: ['low_relevance', 'low_quality'] });
  });

  it('a small image is rejected before scoring with resolution_too_low, everywhere', async () => {
    const b = await liveBuyer(rt);
    const job = await createJob(rt, b.live, { files_needed: 1, min_width: 1000, min_height: 800 });
    const v = await verdictFor(b.live, job.id, await detailedJpeg(102));
    expect(v.worker).toMatchObject({ status: 'rejected', ai_star_rating: 1, reason_codes: ['resolution_too_low'] });
    expect(v.buyer).toMatchObject({ status: 'rejected', reason_codes: ['resolution_too_low'] });
    expect((await eventFor(b.live, 'submission.scored', v.subId)).data).toMatchObject({ reason_codes: ['resolution_too_low'], annotations: null });
    expect((await eventFor(b.live, 'submission.rejected', v.subId)).data).toMatchObject({ reason_codes: ['resolution_too_low'] });
  });

  it('an exact duplicate of an approved file is rejected with duplicate, everywhere', async () => {
    const b = await liveBuyer(rt);
    const job = await createJob(rt, b.live, { files_needed: 2 });
    const bytes = await detailedJpeg(103);
    expect((await verdictFor(b.live, job.id, bytes)).worker.status).toBe('approved');
    const v = await verdictFor(b.live, job.id, bytes);
    expect(v.worker).toMatchObject({ status: 'rejected', ai_star_rating: 1, reason_codes: ['duplicate'] });
    expect(v.buyer).toMatchObject({ status: 'rejected', reason_codes: ['duplicate'] });
    expect((await eventFor(b.live, 'submission.scored', v.subId)).data).toMatchObject({ reason_codes: ['duplicate'] });
    expect((await eventFor(b.live, 'submission.rejected', v.subId)).data).toMatchObject({ reason_codes: ['duplicate'] });
  });

  it('D67: an image the NSFW model scores ≥ 0.85 is rejected with 1 star and policy_violation: no File, no charge, annotations null', async () => {
    // A provider stub behind the NSFW model interface stands in for nsfwjs's score.
    const explicit: NsfwModel = { classify: async () => [{ className: 'Porn', probability: 0.97 }, { className: 'Neutral', probability: 0.03 }] };
    setNsfwModel(explicit);
    try {
      const b = await liveBuyer(rt);
      const job = await createJob(rt, b.live, { files_needed: 1 });
      const v = await verdictFor(b.live, job.id, await detailedJpeg(104));
      expect(v.worker).toMatchObject({ status: 'rejected', ai_star_rating: 1, reason_codes: ['policy_violation'], payout_cents: null });
      expect(v.buyer).toMatchObject({ status: 'rejected', reason_codes: ['policy_violation'], file_ids: [] });
      const scored = (await eventFor(b.live, 'submission.scored', v.subId)).data;
      expect(scored).toMatchObject({ status: 'rejected', ai_star_rating: 1, reason_codes: ['policy_violation'], annotations: null });
      await indexesCaughtUp(); // both lists read indexes: nothing written is left out
      expect((await rt.request('GET', `/v1/jobs/${job.id}/files?min_score=1`, { key: b.live })).json.data).toEqual([]);
      expect((await rt.request('GET', '/v1/billing/transactions?type=deduction&limit=100', { key: b.live })).json.data).toEqual([]);
      expect((await rt.request('GET', `/v1/jobs/${job.id}`, { key: b.live })).json).toMatchObject({ files_approved: 0 });
    } finally {
      setNsfwModel(null);
    }
  });

  it('an NSFW score below the limit does not trigger the policy (same pipeline, stub at 0.5)', async () => {
    setNsfwModel({ classify: async () => [{ className: 'Porn', probability: 0.5 }, { className: 'Neutral', probability: 0.5 }] });
    try {
      const b = await liveBuyer(rt);
      const job = await createJob(rt, b.live, { files_needed: 1 });
      const v = await verdictFor(b.live, job.id, await detailedJpeg(105));
      expect(v.worker).toMatchObject({ status: 'approved', reason_codes: [] });
    } finally {
      setNsfwModel(null);
    }
  });
});
