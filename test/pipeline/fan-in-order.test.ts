import type { SQSClient } from '@aws-sdk/client-sqs';
import type { SQSEvent } from 'aws-lambda';
import { InternalServerError } from '@aws-sdk/client-dynamodb';
import { db } from '../../shared/db/client';
import { startTestRuntime, type TestRuntime, indexesCaughtUp } from '../support/harness';
import type { ScoreResult } from '../../shared/scoring/types';
import { accept, createJob, detailedJpeg, liveBuyer, multipart, queueClient, signupWorker, sqsRecord, takeMessage, uploadFile } from './support';

// D54 fan-in: each stage decides on the submission as its own write left it (no second read), and
// a pre-signed upload completes from the scoring stage. Whatever order the stages and the upload's
// completion take, exactly one verdict, one File and one charge result. Consumers run by hand.
describe('fan-in: the verdict whatever order the stages and the upload completion take', () => {
  let rt: TestRuntime;
  let sqs: SQSClient;
  type Consumer = (e: SQSEvent) => Promise<{ batchItemFailures: { itemIdentifier: string }[] }>;
  let score: Consumer;
  let annotate: Consumer;

  beforeAll(async () => {
    process.env.LOCAL_FIXED_OTP = '123456';
    rt = await startTestRuntime({ enablePollers: false });
    sqs = queueClient(rt);
    score = (await import('../../functions/pipeline/score')).handler as never;
    annotate = (await import('../../functions/pipeline/annotate')).handler as never;
  });
  afterAll(async () => {
    sqs?.destroy();
    await rt?.stop();
  });



  async function presignedUpload(seed: number) {
    const buyer = await liveBuyer(rt);
    const job = await createJob(rt, buyer.live, { files_needed: 1 });
    const w = await signupWorker(rt);
    const sub = (await accept(rt, w.token, job.id)).json.id as string;
    const bytes = await detailedJpeg(seed);
    const plan = await rt.request('POST', `/internal/worker/submissions/${sub}/upload`, { key: w.token, body: { files: [{ filename: 'p.jpg', content_type: 'image/jpeg', size_bytes: bytes.length }] } });
    expect(plan.status).toBe(200);
    expect((await fetch(plan.json.uploads[0].url, { method: 'PUT', body: bytes, headers: plan.json.uploads[0].headers })).status).toBe(200);
    return { buyer, job, w, sub, bytes, upload: plan.json.uploads[0] as { url: string; headers: Record<string, string> }, bodies: { scoring: await takeMessage(rt, sqs, 'scoring', sub), annotation: await takeMessage(rt, sqs, 'annotation', sub) } };
  }

  async function expectOneApproval(t: Awaited<ReturnType<typeof presignedUpload>>) {
    expect((await rt.request('GET', `/internal/worker/submissions/${t.sub}`, { key: t.w.token })).json.status).toBe('approved');
    await indexesCaughtUp();
    expect((await rt.request('GET', '/v1/billing/transactions?type=deduction', { key: t.buyer.live })).json.data).toHaveLength(1);
    expect((await rt.request('GET', `/v1/jobs/${t.job.id}/files`, { key: t.buyer.live })).json.data).toHaveLength(1);
    expect((await rt.request('GET', `/v1/jobs/${t.job.id}`, { key: t.buyer.live })).json).toMatchObject({ status: 'completed', files_approved: 1 });
  }

  it('pre-signed, annotation first: both results are in before the upload completes, so completing takes the verdict', async () => {
    const t = await presignedUpload(201);
    expect((await annotate({ Records: [sqsRecord(t.bodies.annotation, 'a')] })).batchItemFailures).toEqual([]);
    // Annotated but not complete: no verdict without the score.
    expect((await rt.request('GET', `/internal/worker/submissions/${t.sub}`, { key: t.w.token })).json.status).toBe('awaiting_upload');
    expect((await score({ Records: [sqsRecord(t.bodies.scoring, 's')] })).batchItemFailures).toEqual([]);
    await expectOneApproval(t);
  });

  it('pre-signed, scoring first: the upload completes with the score, and the annotation stage decides on its own write', async () => {
    const t = await presignedUpload(202);
    expect((await score({ Records: [sqsRecord(t.bodies.scoring, 's')] })).batchItemFailures).toEqual([]);
    expect((await rt.request('GET', `/internal/worker/submissions/${t.sub}`, { key: t.w.token })).json.status).toBe('pending_score');
    expect((await annotate({ Records: [sqsRecord(t.bodies.annotation, 'a')] })).batchItemFailures).toEqual([]);
    await expectOneApproval(t);
  });

  it('pre-signed, both stages at once and each delivered twice: one verdict, one File, one charge', async () => {
    const t = await presignedUpload(203);
    const out = await Promise.all([
      score({ Records: [sqsRecord(t.bodies.scoring, 's1')] }),
      annotate({ Records: [sqsRecord(t.bodies.annotation, 'a1')] }),
      score({ Records: [sqsRecord(t.bodies.scoring, 's2')] }),
      annotate({ Records: [sqsRecord(t.bodies.annotation, 'a2')] }),
    ]);
    expect(out.flatMap((r) => r.batchItemFailures)).toEqual([]);
    await expectOneApproval(t);
  });

  it('a pre-signed file that fails its check after the round completed on the other files is rejected by its pre-check: the submission is not left pending', async () => {
    const buyer = await liveBuyer(rt);
    const job = await createJob(rt, buyer.live, { files_needed: 2, files_per_submission: 2 });
    const w = await signupWorker(rt);
    const sub = (await accept(rt, w.token, job.id)).json.id as string;
    const good = await detailedJpeg(211);
    const bad = Buffer.alloc(4096, 0x41); // declared a JPEG, not one
    const plan = await rt.request('POST', `/internal/worker/submissions/${sub}/upload`, {
      key: w.token,
      body: { files: [{ filename: 'a.jpg', content_type: 'image/jpeg', size_bytes: good.length }, { filename: 'b.jpg', content_type: 'image/jpeg', size_bytes: bad.length }] },
    });
    expect(plan.status).toBe(200);
    const [ua, ub] = plan.json.uploads as { file_id: string; url: string; headers: Record<string, string> }[];
    expect((await fetch(ua!.url, { method: 'PUT', body: good, headers: ua!.headers })).status).toBe(200);
    expect((await fetch(ub!.url, { method: 'PUT', body: bad, headers: ub!.headers })).status).toBe(200);
    // File a is scored first: both objects are there, so it completes the round before b is checked.
    expect((await score({ Records: [sqsRecord(await takeMessage(rt, sqs, 'scoring', ua!.file_id), 'sa')] })).batchItemFailures).toEqual([]);
    expect((await rt.request('GET', `/internal/worker/submissions/${sub}`, { key: w.token })).json.status).toBe('pending_score');
    expect((await score({ Records: [sqsRecord(await takeMessage(rt, sqs, 'scoring', ub!.file_id), 'sb')] })).batchItemFailures).toEqual([]);
    const after = (await rt.request('GET', `/internal/worker/submissions/${sub}`, { key: w.token })).json;
    expect(after).toMatchObject({ status: 'rejected' });
    expect(after.reason_codes).toContain('unreadable_media');
    expect((await rt.request('GET', '/v1/billing/transactions?type=deduction', { key: buyer.live })).json.data).toEqual([]);
  });

  it('a scoring message delivered again after its completion failed completes the upload then', async () => {
    const t = await presignedUpload(212);
    // The first delivery stored the score and then failed to complete (its function stopped there):
    // the score is on the file, the submission still awaits its upload.
    const { scoreObject } = await import('../../shared/work/scoring-stage');
    const { writePart } = await import('../../shared/work/stage-write');
    const { getSubmissionItem } = await import('../../shared/work/reservations');
    const key = JSON.parse(t.bodies.scoring).detail.object.key as string;
    const sub = (await getSubmissionItem(t.sub))!;
    const stored: ScoreResult = { ai_star_rating: 4, dimensions: { relevance: 4, quality: 4, instruction_compliance: 4 }, ai_reasoning: 'Sharp, well exposed storefront.', provider: 'local', model: 'test', reason_codes: [] };
    const { measure } = await import('../../shared/media/metadata');
    const { getObjectBytes } = await import('../../shared/storage/s3');
    const metadata = JSON.parse(JSON.stringify(await measure(await getObjectBytes(key), 'image/jpeg', {})));
    expect((await writePart(sub, sub.uploads[0]!.file_id, { metadata, score: stored }, 'score')).stored).toBe(true);
    expect((await rt.request('GET', `/internal/worker/submissions/${t.sub}`, { key: t.w.token })).json.status).toBe('awaiting_upload');
    expect(await scoreObject(key)).toBe('skipped');
    expect((await rt.request('GET', `/internal/worker/submissions/${t.sub}`, { key: t.w.token })).json.status).toBe('pending_score');
    expect((await annotate({ Records: [sqsRecord(t.bodies.annotation, 'a')] })).batchItemFailures).toEqual([]);
    await expectOneApproval(t);
  });

  it('an upload completed after both stages wrote queues its verdict in the same commit: a verdict that fails after the commit is still taken, once', async () => {
    const t = await presignedUpload(214);
    // Both stages wrote before the upload completed (as the upload route can find them), so the
    // completion finds the round ready and no stage is left to decide.
    const { writePart } = await import('../../shared/work/stage-write');
    const { getSubmissionItem } = await import('../../shared/work/reservations');
    const { measure } = await import('../../shared/media/metadata');
    const { completeUpload } = await import('../../shared/work/complete-upload');
    const { systemContext } = await import('../../shared/context');
    const sub = (await getSubmissionItem(t.sub))!;
    const fileId = sub.uploads[0]!.file_id;
    const stored: ScoreResult = { ai_star_rating: 4, dimensions: { relevance: 4, quality: 4, instruction_compliance: 4 }, ai_reasoning: 'Sharp, well exposed storefront.', provider: 'local', model: 'test', reason_codes: [] };
    const metadata = JSON.parse(JSON.stringify(await measure(t.bytes, 'image/jpeg', {})));
    expect((await writePart(sub, fileId, { metadata, score: stored }, 'score')).stored).toBe(true);
    expect((await writePart(sub, fileId, { annotations: null }, 'annotations')).stored).toBe(true);
    // DynamoDB refuses the verdict's transaction (the one that writes the File) right after the
    // completion commits, on the wire as a 500 InternalServerError would come: injected once.
    let refused = 0;
    const name = 'refuseVerdictOnce';
    db().middlewareStack.add(
      (next, context) => async (args) => {
        if (refused === 0 && /^TransactWrite(Items)?Command$/.test(String(context.commandName)) && JSON.stringify(args.input).includes('"entity":"file"')) {
          refused++;
          throw new InternalServerError({ message: 'Internal server error', $metadata: { httpStatusCode: 500 } });
        }
        return next(args);
      },
      { step: 'initialize', name },
    );
    try {
      await completeUpload(systemContext('upload-route'), t.sub, sub.round!, { checkObjects: true });
    } finally {
      db().middlewareStack.remove(name);
    }
    expect(refused).toBe(1);
    expect((await rt.request('GET', `/internal/worker/submissions/${t.sub}`, { key: t.w.token })).json.status).toBe('pending_score');
    // The commit's fan-in item reached the scoring queue through the table stream; it decides.
    const fanIn = await takeMessage(rt, sqs, 'scoring', t.sub);
    expect(JSON.parse(fanIn).dynamodb.NewImage.entity.S).toBe('fan_in');
    expect((await score({ Records: [sqsRecord(fanIn, 'f1')] })).batchItemFailures).toEqual([]);
    await expectOneApproval(t);
    // Delivered again: nothing more.
    expect((await score({ Records: [sqsRecord(fanIn, 'f2')] })).batchItemFailures).toEqual([]);
    await expectOneApproval(t);
  });

  it('a file its score would approve after its job was cancelled is rejected with reason_codes [] (a verdict always carries an array; nothing fell short), the reasoning says why', async () => {
    const t = await presignedUpload(215);
    expect((await rt.request('POST', `/v1/jobs/${t.job.id}/cancel`, { key: t.buyer.live, headers: { 'Idempotency-Key': `cancel-${t.sub}` } })).status).toBe(200);
    // The cancellation's own consumer is not polled here: the verdict meets the cancelled job.
    expect((await score({ Records: [sqsRecord(t.bodies.scoring, 's')] })).batchItemFailures).toEqual([]);
    expect((await annotate({ Records: [sqsRecord(t.bodies.annotation, 'a')] })).batchItemFailures).toEqual([]);
    const v = (await rt.request('GET', `/v1/submissions/${t.sub}`, { key: t.buyer.live })).json;
    expect(v).toMatchObject({ status: 'rejected', reason_codes: [], ai_reasoning: expect.stringContaining('no longer takes files') });
    expect(v.ai_star_rating).toBeGreaterThanOrEqual(3); // the model's rating stays: it judged the file
  });

  it('a pre-signed upload completes when its bytes pass their check, before the provider answers: an outage does not let the reservation run out', async () => {
    const t = await presignedUpload(216);
    const { setScorerFactory } = await import('../../shared/work/scoring-stage');
    setScorerFactory(() => ({ name: 'bedrock', score: async () => Promise.reject(Object.assign(new Error('Service unavailable'), { name: 'ServiceUnavailableException', $metadata: { httpStatusCode: 503 } })) }) as never);
    try {
      expect((await score({ Records: [sqsRecord(t.bodies.scoring, 's1')] })).batchItemFailures).toHaveLength(1); // retried later
    } finally {
      setScorerFactory(null);
    }
    // Delivered in time, so no longer awaiting its upload: the sweep cannot expire it meanwhile.
    expect((await rt.request('GET', `/internal/worker/submissions/${t.sub}`, { key: t.w.token })).json.status).toBe('pending_score');
    expect((await score({ Records: [sqsRecord(t.bodies.scoring, 's2')] })).batchItemFailures).toEqual([]);
    expect((await annotate({ Records: [sqsRecord(t.bodies.annotation, 'a')] })).batchItemFailures).toEqual([]);
    await expectOneApproval(t);
  });

  it('pre-signed upload URLs expire with the reservation: bytes that land after it could not complete the upload', async () => {
    const { clock } = await import('../../shared/clock');
    const buyer = await liveBuyer(rt);
    const job = await createJob(rt, buyer.live, { files_needed: 1 });
    const w = await signupWorker(rt);
    const a = await accept(rt, w.token, job.id);
    clock.advance(50 * 60_000); // ten minutes of the hour's reservation left
    try {
      const plan = await rt.request('POST', `/internal/worker/submissions/${a.json.id}/upload`, { key: w.token, body: { files: [{ filename: 'p.jpg', content_type: 'image/jpeg', size_bytes: 1234 }] } });
      expect(plan.status).toBe(200);
      const expires = Date.parse(plan.json.uploads[0].expires_at);
      expect(expires).toBeLessThanOrEqual(Date.parse(a.json.reserved_until));
      expect(expires).toBeGreaterThan(Date.parse(a.json.reserved_until) - 2_000);
    } finally {
      clock.reset();
    }
  });

  it('an upload request without a file is 400 missing_file before any business rule (D42), even once the reservation has ended', async () => {
    const buyer = await liveBuyer(rt);
    const job = await createJob(rt, buyer.live, { files_needed: 1 });
    const w = await signupWorker(rt);
    const a = await accept(rt, w.token, job.id);
    expect((await uploadFile(rt, w.token, a.json.id, await detailedJpeg(217))).status).toBe(202); // the reservation is used up
    const noFile = multipart([{ field: 'device_model', data: 'Pixel 9' }]);
    const r = await rt.request('POST', `/internal/worker/submissions/${a.json.id}/upload`, { key: w.token, body: noFile.body, headers: { 'Content-Type': noFile.contentType } });
    expect(r.status).toBe(400);
    expect(r.json.error.details).toEqual([expect.objectContaining({ field: 'file', code: 'missing_file' })]);
  });

  it('pre-signed files that landed in time complete their upload though the pipeline reaches them after the reservation ended; an empty plan is swept after the grace', async () => {
    const { clock } = await import('../../shared/clock');
    const { sweepExpiredReservations, PRESIGNED_GRACE_MS } = await import('../../shared/work/release-reservation');
    const landed = await presignedUpload(218); // its bytes landed now, within the hour
    const buyer = await liveBuyer(rt);
    const job = await createJob(rt, buyer.live, { files_needed: 1 });
    const w = await signupWorker(rt);
    const empty = (await accept(rt, w.token, job.id)).json.id as string;
    expect((await rt.request('POST', `/internal/worker/submissions/${empty}/upload`, { key: w.token, body: { files: [{ filename: 'p.jpg', content_type: 'image/jpeg', size_bytes: 1234 }] } })).status).toBe(200);
    try {
      clock.advance(61 * 60_000); // both reservations have ended; the pipeline has not run yet
      await indexesCaughtUp(); // the sweep is scheduled, minutes after these writes, and reads an index
      await sweepExpiredReservations();
      const status = async (token: string, id: string) => (await rt.request('GET', `/internal/worker/submissions/${id}`, { key: token })).json.status;
      expect(await status(landed.w.token, landed.sub)).toBe('awaiting_upload'); // left for the pipeline
      expect(await status(w.token, empty)).toBe('awaiting_upload');
      expect((await score({ Records: [sqsRecord(landed.bodies.scoring, 's')] })).batchItemFailures).toEqual([]);
      expect(await status(landed.w.token, landed.sub)).toBe('pending_score'); // completed by when its bytes landed
      expect((await annotate({ Records: [sqsRecord(landed.bodies.annotation, 'a')] })).batchItemFailures).toEqual([]);
      await expectOneApproval(landed);
      clock.advance(PRESIGNED_GRACE_MS); // past the grace: nothing landed for the other plan
      await indexesCaughtUp(); // the sweep is scheduled, minutes after these writes, and reads an index
      await sweepExpiredReservations();
      expect(await status(w.token, empty)).toBe('expired');
    } finally {
      clock.reset();
    }
  });

  it('the bytes approved are the bytes delivered: the upload URL writes once, so a second PUT of other bytes is refused (412)', async () => {
    const t = await presignedUpload(213);
    expect((await score({ Records: [sqsRecord(t.bodies.scoring, 's')] })).batchItemFailures).toEqual([]);
    expect((await annotate({ Records: [sqsRecord(t.bodies.annotation, 'a')] })).batchItemFailures).toEqual([]);
    await expectOneApproval(t);
    const other = Buffer.concat([t.bytes.subarray(0, 64), Buffer.alloc(t.bytes.length - 64, 0x42)]); // same length, other bytes
    const again = await fetch(t.upload.url, { method: 'PUT', body: other, headers: t.upload.headers });
    expect(again.status).toBe(412);
    const [file] = (await rt.request('GET', `/v1/jobs/${t.job.id}/files`, { key: t.buyer.live })).json.data;
    expect(Buffer.from(await (await fetch(file.download_url)).arrayBuffer()).equals(t.bytes)).toBe(true);
  });
});
