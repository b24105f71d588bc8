import type { SQSClient } from '@aws-sdk/client-sqs';
import { GetObjectTaggingCommand, ListObjectsV2Command, S3Client } from '@aws-sdk/client-s3';
import { S3_LOCAL_CREDENTIALS } from '../../local/s3';
import type { SQSEvent } from 'aws-lambda';
import { startTestRuntime, waitFor, type TestRuntime, indexesCaughtUp } from '../support/harness';
import { idemKey } from '../support/buyers';
import { accept, createJob, detailedJpeg, flatPng, liveBuyer, queueClient, signupWorker, sqsRecord, takeMessage, uploadFile } from './support';
import { cancelledJobOf } from '../../shared/work/cancelled-job';
import { emulateIndexLag } from '../../local/index-lag';
import { TABLE_STREAM } from '../../shared/manifest/wiring';

// Spec, job status table: cancelling a job rejects its pending submissions (and notifies the
// workers: their submissions change status). The `cancellations` queue is fed by the cancel's own
// commit (pipe job-cancelled) and polled here; scoring and annotation are not polled, so a
// submission stays pending_score until the test runs a stage by hand.
jest.setTimeout(240_000);

type Handler = (e: SQSEvent) => Promise<{ batchItemFailures: { itemIdentifier: string }[] }>;

describe('cancel: pending submissions are rejected at once', () => {
  let rt: TestRuntime;
  let sqs: SQSClient;
  let score: Handler;
  let annotate: Handler;
  let s3: S3Client;
  beforeAll(async () => {
    process.env.LOCAL_FIXED_OTP = '123456';
    rt = await startTestRuntime({ onlyQueues: ['cancellations'] });
    sqs = queueClient(rt);
    score = (await import('../../functions/pipeline/score')).handler as never;
    annotate = (await import('../../functions/pipeline/annotate')).handler as never;
    s3 = new S3Client({ endpoint: rt.s3Endpoint, forcePathStyle: true, region: 'us-east-1', credentials: S3_LOCAL_CREDENTIALS, requestChecksumCalculation: 'WHEN_REQUIRED' });
  });
  afterAll(async () => {
    s3?.destroy();
    sqs?.destroy();
    await rt?.stop();
  });

  const cancel = (key: string, jobId: string) => rt.request('POST', `/v1/jobs/${jobId}/cancel`, { key, headers: { 'Idempotency-Key': idemKey() } });
  const workerView = async (token: string, subId: string) => (await rt.request('GET', `/internal/worker/submissions/${subId}`, { key: token })).json;
  const buyerView = async (key: string, subId: string) => (await rt.request('GET', `/v1/submissions/${subId}`, { key })).json;
  const eventsOf = async (key: string, type: string) =>
    ((await indexesCaughtUp(), await rt.request('GET', `/v1/webhook_events?type=${type}&limit=100`, { key })).json?.data ?? []) as { data: Record<string, unknown> }[];
  const run = async (h: Handler, body: string, id: string) => expect((await h({ Records: [sqsRecord(body, id)] })).batchItemFailures).toEqual([]);
  /** The verdict tag of each object of a submission (the lifecycle rule deletes `rejected` ones). */
  const tagsOf = async (subId: string) => {
    const listed = await s3.send(new ListObjectsV2Command({ Bucket: rt.bucketName, Prefix: `uploads/${subId}/` }));
    return Promise.all((listed.Contents ?? []).map(async (o) => (await s3.send(new GetObjectTaggingCommand({ Bucket: rt.bucketName, Key: o.Key! }))).TagSet?.find((t) => t.Key === 'verdict')?.Value ?? null));
  };

  it('a pending_score submission is rejected without a score, the buyer is told, and its scoring never runs', async () => {
    const buyer = await liveBuyer(rt);
    const job = await createJob(rt, buyer.live, { files_needed: 2, price_per_file_cents: 10 });
    const w = await signupWorker(rt);
    const a = await accept(rt, w.token, job.id);
    expect((await uploadFile(rt, w.token, a.json.id, await detailedJpeg(301))).status).toBe(202);
    expect((await workerView(w.token, a.json.id)).status).toBe('pending_score');

    expect((await cancel(buyer.live, job.id)).status).toBe(200);
    const sub = await waitFor(async () => {
      const s = await buyerView(buyer.live, a.json.id);
      return s.status === 'rejected' ? s : null;
    });
    // No model decided it: no rating, no dimensions, no reason codes; the reasoning says why.
    expect(sub).toMatchObject({ status: 'rejected', ai_star_rating: null, dimensions: null, reason_codes: null, ai_reasoning: expect.stringContaining('cancelled') });
    const [ev] = await waitFor(async () => {
      const evs = await eventsOf(buyer.live, 'submission.rejected');
      return evs.length ? evs : null;
    });
    expect(ev!.data).toEqual({ job_id: job.id, submission_id: a.json.id, ai_star_rating: null, ai_reasoning: sub.ai_reasoning, reason_codes: null });
    expect((await rt.request('GET', `/v1/jobs/${job.id}`, { key: buyer.live })).json.submission_summary).toMatchObject({ total_submissions: 1, approved: 0, rejected: 1 });
    // The date-range summary counts it as rejected too, but its missing rating is not 0 stars.
    expect((await rt.request('GET', `/v1/submissions/summary?job_id=${job.id}&start_date=2020-01-01T00:00:00Z`, { key: buyer.live })).json).toMatchObject({
      total_submissions: 1,
      rejected: 1,
      avg_ai_star_rating: null,
      by_type: [{ type: 'image', total: 1, avg_ai_star_rating: null }],
    });
    expect(await waitFor(async () => ((await tagsOf(a.json.id)).join() === 'rejected' ? 'tagged' : null))).toBe('tagged');

    // The stages' messages, delivered late, find the submission decided: nothing is scored or charged.
    await run(score, await takeMessage(rt, sqs, 'scoring', a.json.id), 's1');
    await run(annotate, await takeMessage(rt, sqs, 'annotation', a.json.id), 'a1');
    expect(await workerView(w.token, a.json.id)).toMatchObject({ status: 'rejected', ai_star_rating: null, payout_cents: null });
    expect((await rt.request('GET', '/v1/billing/transactions?type=deduction', { key: buyer.live })).json.data).toEqual([]);
    expect((await rt.request('GET', '/v1/billing/transactions?type=refund', { key: buyer.live })).json.data.map((t: { amount_cents: number }) => t.amount_cents)).toEqual([20]);
  });

  it('a reservation awaiting its upload ends as cancelled for the worker, who can no longer upload', async () => {
    const buyer = await liveBuyer(rt);
    const job = await createJob(rt, buyer.live, { files_needed: 1 });
    const w = await signupWorker(rt);
    const a = await accept(rt, w.token, job.id);
    expect(a.json.status).toBe('awaiting_upload');
    // A pre-signed upload planned before the cancel, whose bytes land after it.
    const bytes = await detailedJpeg(304);
    const plan = await rt.request('POST', `/internal/worker/submissions/${a.json.id}/upload`, { key: w.token, body: { files: [{ filename: 'late.jpg', content_type: 'image/jpeg', size_bytes: bytes.length }] } });
    expect(plan.status).toBe(200);

    expect((await cancel(buyer.live, job.id)).status).toBe(200);
    const sub = await waitFor(async () => {
      const s = await workerView(w.token, a.json.id);
      return s.status === 'cancelled' ? s : null;
    });
    expect(sub).toMatchObject({ status: 'cancelled', reserved_until: null });
    expect((await uploadFile(rt, w.token, a.json.id, await detailedJpeg(302))).status).toBe(409);
    // The buyer never saw it and is not told about it (the lists read indexes: their lag waited out).
    await indexesCaughtUp();
    expect((await rt.request('GET', `/v1/jobs/${job.id}/submissions`, { key: buyer.live })).json.data).toEqual([]);
    expect((await rt.request('GET', `/v1/submissions/${a.json.id}`, { key: buyer.live })).status).toBe(404);
    expect(await eventsOf(buyer.live, 'submission.rejected')).toEqual([]);
    const mine = (await rt.request('GET', '/internal/worker/submissions?status=cancelled', { key: w.token })).json.data;
    expect(mine.map((s: { id: string }) => s.id)).toEqual([a.json.id]);

    // The late bytes are scored for nothing: the scoring stage tags them for the lifecycle rule.
    expect((await fetch(plan.json.uploads[0].url, { method: 'PUT', body: bytes, headers: plan.json.uploads[0].headers })).status).toBe(200);
    await run(score, await takeMessage(rt, sqs, 'scoring', a.json.id), 's-late');
    expect(await tagsOf(a.json.id)).toEqual(['rejected']);
    expect(await workerView(w.token, a.json.id)).toMatchObject({ status: 'cancelled' });
  });

  it('a retry_pending submission is rejected for good, keeping its first verdict', async () => {
    // The index lags longer than the cancel's message takes to arrive: the verdict that made the
    // submission retry_pending is not in the job's submission list when the consumer first could read it.
    emulateIndexLag(1_500);
    try {
      await retryPendingRejectedForGood();
    } finally {
      emulateIndexLag(rt.indexLagMs);
    }
  });

  async function retryPendingRejectedForGood() {
    const buyer = await liveBuyer(rt);
    // min_star_rating 2: the local scorer's 1 star for a flat image is T−1, a retry (D27).
    const job = await createJob(rt, buyer.live, { files_needed: 1, min_star_rating: 2 });
    const w = await signupWorker(rt);
    const a = await accept(rt, w.token, job.id);
    expect((await uploadFile(rt, w.token, a.json.id, await flatPng(), 'image/png', 'flat.png')).status).toBe(202);
    await run(score, await takeMessage(rt, sqs, 'scoring', a.json.id), 's2');
    await run(annotate, await takeMessage(rt, sqs, 'annotation', a.json.id), 'a2');
    const first = await workerView(w.token, a.json.id);
    expect(first).toMatchObject({ status: 'retry_pending', ai_star_rating: 1 });

    expect((await cancel(buyer.live, job.id)).status).toBe(200);
    const sub = await waitFor(async () => {
      const s = await buyerView(buyer.live, a.json.id);
      return s.status === 'rejected' ? s : null;
    });
    expect(sub).toMatchObject({ status: 'rejected', ai_star_rating: 1, reason_codes: first.reason_codes, ai_reasoning: expect.stringContaining('cancelled before the retry') });
    expect((await uploadFile(rt, w.token, a.json.id, await detailedJpeg(303), 'image/jpeg', 'retry.jpg', 'retry')).status).toBe(409);
    const rejected = await waitFor(async () => {
      const evs = await eventsOf(buyer.live, 'submission.rejected');
      return evs.length ? evs : null;
    });
    expect(rejected.map((e) => e.data.submission_id)).toEqual([a.json.id]);
    expect(await waitFor(async () => ((await tagsOf(a.json.id)).join() === 'rejected' ? 'tagged' : null))).toBe('tagged');
  }

  it('the consumer takes the job from the job.cancelled INSERT record or an operator redrive, and refuses anything else', () => {
    const record = (type: string) =>
      JSON.stringify({ eventName: 'INSERT', dynamodb: { NewImage: { entity: { S: 'event' }, type: { S: type }, envelope: { M: { data: { M: { job_id: { S: 'job_01J0000000000000000000000A' } } } } } } } });
    expect(cancelledJobOf(record('job.cancelled'))).toBe('job_01J0000000000000000000000A');
    // A message moved back by hand from the stream rule's dead-letter queue: the whole bus event.
    const busEvent = { version: '0', source: TABLE_STREAM.source, 'detail-type': TABLE_STREAM.detailType, detail: JSON.parse(record('job.cancelled')) };
    expect(cancelledJobOf(JSON.stringify(busEvent))).toBe('job_01J0000000000000000000000A');
    expect(cancelledJobOf(JSON.stringify({ kind: 'job.cancelled', job_id: 'job_01J0000000000000000000000A' }))).toBe('job_01J0000000000000000000000A');
    expect(() => cancelledJobOf(record('job.completed'))).toThrow('not the INSERT record');
    expect(() => cancelledJobOf(JSON.stringify({ kind: 'job.cancelled', job_id: 'sub_x' }))).toThrow('names no job');
    expect(() => cancelledJobOf('{')).toThrow('not JSON');
  });
});
