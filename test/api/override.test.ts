/**
 * D71 buyer override, end to end on the local runtime (real pipeline, DynamoDB Local, S3 emulator):
 * each rule, each conflict code, idempotency, and 20 concurrent overrides moving money once.
 */
import { GetCommand, UpdateCommand } from '@aws-sdk/lib-dynamodb';
import { annotateObject } from '../../shared/work/annotation-stage';
import { db, tableName } from '../../shared/db/client';
import { COMMIT_ATTEMPTS, CONTENTION_BUDGET_MS } from '../../shared/db/conflicts';
import { keys } from '../../shared/db/keys';
import { deleteWithdrawnObjects } from '../../shared/work/withdrawn-objects';
import { deleteObjects } from '../../shared/storage/s3';
import { uploadObjectKeys } from '../../shared/work/verdict';
import { startTestRuntime, waitFor, type TestRuntime, indexesCaughtUp } from '../support/harness';
import { clock, DAY_MS } from '../../shared/clock';
import { idemKey } from '../support/buyers';
import { cancelTransactionsWhile } from '../support/transaction-conflicts';
import { accept, annotationsRecorded, createJob, detailedJpeg, flatPng, liveBuyer, multipart, signupWorker, uploadFile, waitForVerdict } from '../pipeline/support';
import { GetObjectTaggingCommand, S3Client } from '@aws-sdk/client-s3';
import { S3_LOCAL_CREDENTIALS } from '../../local/s3';

// End to end through the real pipeline (models load on first use) on a shared machine: generous time.
jest.setTimeout(240_000);

describe('D71: POST /v1/submissions/{id}/override', () => {
  let rt: TestRuntime;
  beforeAll(async () => {
    process.env.LOCAL_FIXED_OTP = '123456';
    rt = await startTestRuntime();
  });
  afterAll(async () => {
    await rt?.stop();
  });

  const verdictOf = (token: string, subId: string) => waitForVerdict(rt, token, subId, 90_000);
  /** A worker uploads `bytes` to the job; resolves with the verdict (worker view) and the worker. */
  const submit = async (jobId: string, bytes: Buffer, contentType = 'image/jpeg') => {
    const w = await signupWorker(rt);
    const a = await accept(rt, w.token, jobId);
    expect(a.status).toBe(201);
    expect((await uploadFile(rt, w.token, a.json.id, bytes, contentType, contentType === 'image/png' ? 'p.png' : 'p.jpg')).status).toBe(202);
    const sub = await verdictOf(w.token, a.json.id);
    // A pre-check rejects before the annotation stage has finished: an approval waits for it.
    if (sub.status === 'rejected' || sub.status === 'retry_pending') await annotationsRecorded(a.json.id);
    return { sub, worker: w };
  };
  const tagsOf = async (key: string) => {
    const s3 = new S3Client({ endpoint: rt.s3Endpoint, forcePathStyle: true, region: 'us-east-1', credentials: S3_LOCAL_CREDENTIALS, requestChecksumCalculation: 'WHEN_REQUIRED' });
    try {
      return Object.fromEntries(((await s3.send(new GetObjectTaggingCommand({ Bucket: rt.bucketName, Key: key }))).TagSet ?? []).map((t) => [t.Key!, t.Value!]));
    } finally {
      s3.destroy();
    }
  };
  const override = (key: string, subId: string, body: unknown, idem: string | null = idemKey()) =>
    rt.request('POST', `/v1/submissions/${subId}/override`, { key, body, headers: idem ? { 'Idempotency-Key': idem } : {} });
  // Transactions by type are read from an index: wait out its lag, then read.
  const rows = async (key: string, type: string) =>
    (await indexesCaughtUp(), await rt.request('GET', `/v1/billing/transactions?type=${type}&limit=100`, { key })).json.data as { amount_cents: number; job_id: string; submission_id: string }[];
  const credits = async (key: string) => (await rt.request('GET', '/v1/billing/credits', { key })).json;
  const job = async (key: string, id: string) => (await rt.request('GET', `/v1/jobs/${id}`, { key })).json;
  const events = async (key: string, type: string) =>
    ((await rt.request('GET', `/v1/webhook_events?type=${type}&limit=100`, { key })).json?.data ?? []) as { data: Record<string, unknown> }[];

  it('rejecting an approved submission withdraws its Files, returns the money to the escrow as a reversal, reverses the payout and reopens the completed job', async () => {
    const buyer = await liveBuyer(rt);
    const j = await createJob(rt, buyer.live, { files_needed: 1, price_per_file_cents: 10 });
    const { sub, worker } = await submit(j.id, await detailedJpeg(201));
    expect(sub.status).toBe('approved');
    expect(await job(buyer.live, j.id)).toMatchObject({ status: 'completed', files_approved: 1 });
    const [file] = (await rt.request('GET', `/v1/jobs/${j.id}/files`, { key: buyer.live })).json.data;
    expect((await fetch(file.download_url)).status).toBe(200);
    const before = await credits(buyer.live);

    const r = await override(buyer.live, sub.id, { decision: 'reject', reason_code: 'low_quality', note: 'Blurry storefront sign.' });
    expect(r.status).toBe(200);
    expect(r.json).toMatchObject({
      id: sub.id,
      object: 'submission',
      status: 'rejected',
      file_ids: [],
      file_url: null,
      override: { decision: 'reject', reason_code: 'low_quality', note: 'Blurry storefront sign.', overridden_at: expect.any(String) },
    });
    // The worker sees the decision and its standard reason, not the buyer's note.
    const seen = (await rt.request('GET', `/internal/worker/submissions/${sub.id}`, { key: worker.token })).json;
    expect(seen.override).toEqual({ decision: 'reject', reason_code: 'low_quality', overridden_at: expect.any(String) });

    // Files withdrawn: no longer listed, no longer found, and the delivered URL stops working.
    expect((await rt.request('GET', `/v1/jobs/${j.id}/files?min_score=1`, { key: buyer.live })).json.data).toEqual([]);
    expect((await rt.request('POST', `/v1/files/${file.id}/refresh_url`, { key: buyer.live })).status).toBe(404);
    await waitFor(async () => (await fetch(file.download_url)).status === 404);
    // Deleted by the withdrawals queue that the override's commit fed through the table stream,
    // which records it on the submission (the route itself deletes nothing).
    const deletedAt = await waitFor(async () => (await db().send(new GetCommand({ TableName: tableName(), Key: keys.submission(sub.id), ConsistentRead: true }))).Item?.withdrawn_objects_deleted_at);
    expect(deletedAt).toEqual(expect.any(String));
    expect(await deleteWithdrawnObjects(sub.id)).toBe('skipped'); // a redelivered message: deletes again, harmlessly

    // Money: one reversal row +price × n with job_id and submission_id; held grows, available does not.
    expect(await rows(buyer.live, 'reversal')).toEqual([expect.objectContaining({ amount_cents: 10, job_id: j.id, submission_id: sub.id })]);
    const after = await credits(buyer.live);
    expect(after.held_cents).toBe(before.held_cents + 10);
    expect(after.available_cents).toBe(before.available_cents);

    // The job reopens for the slot; the worker's payout is reversed.
    expect(await job(buyer.live, j.id)).toMatchObject({ status: 'in_progress', files_approved: 0, completed_at: null });
    const workerView = (await rt.request('GET', `/internal/worker/submissions/${sub.id}`, { key: worker.token })).json;
    expect(workerView).toMatchObject({ status: 'rejected', payout_cents: 0, override: { decision: 'reject' } });

    // Event and audit entry.
    const ev = await waitFor(async () => (await events(buyer.live, 'submission.overridden'))[0]);
    expect(ev.data).toEqual({ submission_id: sub.id, job_id: j.id, decision: 'reject', previous_status: 'approved', status: 'rejected', reason_code: 'low_quality', amount_cents: 10 });
    const audit = (await rt.request('GET', `/v1/audit-events?event_type=submission.overridden&limit=10`, { key: buyer.live })).json.data;
    expect(audit).toEqual([expect.objectContaining({ event_type: 'submission.overridden', resource: { type: 'submission', id: sub.id } })]);

    // The reopened slot can be filled again, and paid from the returned escrow.
    const again = await submit(j.id, await detailedJpeg(202));
    expect(again.sub.status).toBe('approved');
    expect(await job(buyer.live, j.id)).toMatchObject({ status: 'completed', files_approved: 1 });
    expect((await credits(buyer.live)).held_cents).toBe(before.held_cents);
  });

  it('rejecting then cancelling the reopened job refunds the reversed money', async () => {
    const buyer = await liveBuyer(rt);
    const j = await createJob(rt, buyer.live, { files_needed: 1, price_per_file_cents: 10 });
    const { sub } = await submit(j.id, await detailedJpeg(203));
    expect((await override(buyer.live, sub.id, { decision: 'reject', reason_code: 'other' })).status).toBe(200);
    const c = await rt.request('POST', `/v1/jobs/${j.id}/cancel`, { key: buyer.live, headers: { 'Idempotency-Key': idemKey() } });
    expect(c.status).toBe(200);
    expect((await rows(buyer.live, 'refund')).map((x) => x.amount_cents)).toEqual([10]);
    expect((await credits(buyer.live)).held_cents).toBe(0);
  });

  it('approving a rejected submission is a normal approval: File, deduction, payout, events', async () => {
    const buyer = await liveBuyer(rt);
    const j = await createJob(rt, buyer.live, { files_needed: 2, price_per_file_cents: 10, min_width: 1000 });
    const { sub, worker } = await submit(j.id, await detailedJpeg(204)); // 640 px wide: pre-check rejection
    expect(sub).toMatchObject({ status: 'rejected', ai_star_rating: 1 });
    const r = await override(buyer.live, sub.id, { decision: 'approve', reason_code: 'other', note: 'Width is fine for us.' });
    expect(r.status).toBe(200);
    expect(r.json).toMatchObject({ status: 'approved', file_ids: [expect.stringMatching(/^file_/)], file_url: expect.any(String), override: { decision: 'approve' } });
    // The File keeps the model's rating (1 star): listed with min_score=1.
    expect((await rt.request('GET', `/v1/jobs/${j.id}/files?min_score=1`, { key: buyer.live })).json.data).toHaveLength(1);
    expect(await rows(buyer.live, 'deduction')).toEqual([expect.objectContaining({ amount_cents: -10, submission_id: sub.id })]);
    expect((await rt.request('GET', `/internal/worker/submissions/${sub.id}`, { key: worker.token })).json).toMatchObject({ status: 'approved', payout_cents: 8 });
    expect(await job(buyer.live, j.id)).toMatchObject({ status: 'in_progress', files_approved: 1 });
    const ev = await waitFor(async () => (await events(buyer.live, 'submission.overridden'))[0]);
    expect(ev.data).toMatchObject({ decision: 'approve', previous_status: 'rejected', status: 'approved', amount_cents: 10 });
    expect(await events(buyer.live, 'submission.approved')).toHaveLength(1);
  });

  it("the files list is newest first by the File's created_at: a rejection approved after a later upload's approval lists first", async () => {
    const buyer = await liveBuyer(rt);
    const j = await createJob(rt, buyer.live, { files_needed: 2, price_per_file_cents: 10, min_width: 1000 });
    const first = await submit(j.id, await detailedJpeg(205)); // 640 px wide: pre-check rejection
    expect(first.sub.status).toBe('rejected');
    const second = await submit(j.id, await detailedJpeg(206, 1200, 900));
    expect(second.sub.status).toBe('approved');
    expect((await override(buyer.live, first.sub.id, { decision: 'approve', reason_code: 'other' })).status).toBe(200);
    const files = (await rt.request('GET', `/v1/jobs/${j.id}/files?min_score=1`, { key: buyer.live })).json.data as { submission_id: string; created_at: string }[];
    expect(files.map((f) => f.submission_id)).toEqual([first.sub.id, second.sub.id]);
    expect(Date.parse(files[0]!.created_at)).toBeGreaterThan(Date.parse(files[1]!.created_at));
  });

  it('D54: approving a rejection whose annotation was not recorded yet is 409 until the annotation stage, which still annotates it, has; the File then carries them', async () => {
    const buyer = await liveBuyer(rt);
    const j = await createJob(rt, buyer.live, { files_needed: 2, price_per_file_cents: 10, min_width: 1000 });
    const { sub } = await submit(j.id, await detailedJpeg(214)); // 640 px wide: pre-check rejection
    expect(sub.status).toBe('rejected');
    // As when the annotation message comes after the rejection committed.
    const item = (await db().send(new GetCommand({ TableName: tableName(), Key: keys.submission(sub.id), ConsistentRead: true }))).Item!;
    const upload = item.uploads[0] as { file_id: string; key: string };
    await db().send(
      new UpdateCommand({ TableName: tableName(), Key: keys.submission(sub.id), UpdateExpression: 'REMOVE #p.#f.annotations', ExpressionAttributeNames: { '#p': 'parts', '#f': upload.file_id } }),
    );
    const early = await override(buyer.live, sub.id, { decision: 'approve', reason_code: 'other' });
    expect([early.status, early.json.error.details[0].code]).toEqual([409, 'invalid_state']);
    expect(early.json.error.message).toMatch(/still being annotated/);
    expect(await annotateObject(upload.key)).toBe('stored');
    const r = await override(buyer.live, sub.id, { decision: 'approve', reason_code: 'other' });
    expect(r.status).toBe(200);
    const [file] = (await rt.request('GET', `/v1/jobs/${j.id}/files?min_score=1`, { key: buyer.live })).json.data;
    expect(file.annotations).toMatchObject({ type: 'image' });
  });

  it('approving a retry_pending submission ends its retry window and approves it', async () => {
    const buyer = await liveBuyer(rt);
    const j = await createJob(rt, buyer.live, { files_needed: 1, price_per_file_cents: 10, min_star_rating: 2 });
    const { sub, worker } = await submit(j.id, await flatPng(), 'image/png');
    expect(sub.status).toBe('retry_pending');
    const r = await override(buyer.live, sub.id, { decision: 'approve' });
    expect(r.status).toBe(200);
    expect(r.json).toMatchObject({ status: 'approved', override: { decision: 'approve', reason_code: null, note: null } });
    expect(await job(buyer.live, j.id)).toMatchObject({ status: 'completed', files_approved: 1, completed_at: expect.any(String) });
    // The retry window is gone: the worker can no longer retry.
    expect((await uploadFile(rt, worker.token, sub.id, await detailedJpeg(205), 'image/jpeg', 'r.jpg', 'retry')).status).toBe(409);
  });

  it('approving a retry_pending submission whose retry upload has started is 409 invalid_state: nothing unscored is paid for', async () => {
    const buyer = await liveBuyer(rt);
    const j = await createJob(rt, buyer.live, { files_needed: 1, price_per_file_cents: 10, min_star_rating: 2 });
    const { sub, worker } = await submit(j.id, await flatPng(), 'image/png');
    expect(sub.status).toBe('retry_pending');
    // The worker asks for a pre-signed URL for the retry and has not uploaded yet.
    const plan = await rt.request('POST', `/internal/worker/submissions/${sub.id}/retry`, {
      key: worker.token,
      body: { files: [{ filename: 'retry.jpg', content_type: 'image/jpeg', size_bytes: 20_000 }] },
    });
    expect(plan.status).toBe(200);
    const before = await credits(buyer.live);
    const r = await override(buyer.live, sub.id, { decision: 'approve' });
    expect([r.status, r.json.error?.details?.[0]?.code]).toEqual([409, 'invalid_state']);
    expect(await credits(buyer.live)).toEqual(before);
    expect((await rt.request('GET', `/v1/jobs/${j.id}/files`, { key: buyer.live })).json.data).toEqual([]);
  });

  describe('conflicts answer 409 with details[0].code', () => {
    it('invalid_state: approving an approved submission, rejecting a rejected one, and a second override', async () => {
      const buyer = await liveBuyer(rt);
      const j = await createJob(rt, buyer.live, { files_needed: 2, price_per_file_cents: 10 });
      const { sub } = await submit(j.id, await detailedJpeg(206));
      const a = await override(buyer.live, sub.id, { decision: 'approve' });
      expect([a.status, a.json.error.type, a.json.error.details[0].code]).toEqual([409, 'conflict', 'invalid_state']);
      expect((await override(buyer.live, sub.id, { decision: 'reject', reason_code: 'low_quality' })).status).toBe(200);
      const b = await override(buyer.live, sub.id, { decision: 'reject', reason_code: 'low_quality' });
      expect([b.status, b.json.error.details[0].code]).toEqual([409, 'invalid_state']);
      const c = await override(buyer.live, sub.id, { decision: 'approve' });
      expect([c.status, c.json.error.details[0].code]).toEqual([409, 'invalid_state']);
    });

    it('invalid_state: approving a rejected submission whose bytes were already deleted (a verdict that came very late) delivers and charges nothing', async () => {
      const buyer = await liveBuyer(rt);
      const j = await createJob(rt, buyer.live, { files_needed: 2, price_per_file_cents: 10, min_width: 1000 });
      const { sub } = await submit(j.id, await detailedJpeg(209)); // 640 px wide: rejected
      expect(sub.status).toBe('rejected');
      const item = (await db().send(new GetCommand({ TableName: tableName(), Key: keys.submission(sub.id), ConsistentRead: true }))).Item!;
      await deleteObjects(uploadObjectKeys(item as never)); // what the lifecycle rule does to rejected bytes
      const r = await override(buyer.live, sub.id, { decision: 'approve', reason_code: 'other' });
      expect([r.status, r.json.error.details[0].code]).toEqual([409, 'invalid_state']);
      expect(await rows(buyer.live, 'deduction')).toEqual([]);
      expect((await rt.request('GET', `/v1/jobs/${j.id}/files?min_score=1`, { key: buyer.live })).json.data).toEqual([]);
    });

    it('invalid_state on a submission one of whose files was deleted: the files still there stay tagged verdict=rejected, so the lifecycle rule still deletes them', async () => {
      const buyer = await liveBuyer(rt);
      const j = await createJob(rt, buyer.live, { files_needed: 2, files_per_submission: 2, price_per_file_cents: 10, min_width: 1000 });
      const w = await signupWorker(rt);
      const a = await accept(rt, w.token, j.id);
      const m = multipart([
        { filename: 'a.jpg', contentType: 'image/jpeg', data: await detailedJpeg(231) },
        { filename: 'b.jpg', contentType: 'image/jpeg', data: await detailedJpeg(232) },
      ]);
      expect((await rt.request('POST', `/internal/worker/submissions/${a.json.id}/upload`, { key: w.token, body: m.body, headers: { 'Content-Type': m.contentType } })).status).toBe(202);
      expect((await verdictOf(w.token, a.json.id)).status).toBe('rejected'); // 640 px wide
      const item = (await db().send(new GetCommand({ TableName: tableName(), Key: keys.submission(a.json.id), ConsistentRead: true }))).Item!;
      const [gone, kept] = uploadObjectKeys(item as never);
      await waitFor(async () => (await tagsOf(kept!)).verdict === 'rejected');
      await deleteObjects([gone!]);
      const r = await override(buyer.live, a.json.id, { decision: 'approve', reason_code: 'other' });
      expect([r.status, r.json.error.details[0].code]).toEqual([409, 'invalid_state']);
      expect(await tagsOf(kept!)).toEqual({ verdict: 'rejected' });
    });

    it('invalid_state: approving a submission rejected because two of its files are identical (identical bytes are delivered once per job, D26)', async () => {
      const buyer = await liveBuyer(rt);
      const j = await createJob(rt, buyer.live, { files_needed: 2, files_per_submission: 2, price_per_file_cents: 10 });
      const w = await signupWorker(rt);
      const a = await accept(rt, w.token, j.id);
      const bytes = await detailedJpeg(251);
      const m = multipart([
        { filename: 'a.jpg', contentType: 'image/jpeg', data: bytes },
        { filename: 'b.jpg', contentType: 'image/jpeg', data: bytes },
      ]);
      expect((await rt.request('POST', `/internal/worker/submissions/${a.json.id}/upload`, { key: w.token, body: m.body, headers: { 'Content-Type': m.contentType } })).status).toBe(202);
      expect(await verdictOf(w.token, a.json.id)).toMatchObject({ status: 'rejected', reason_codes: ['duplicate'] });
      const before = await credits(buyer.live);
      const r = await override(buyer.live, a.json.id, { decision: 'approve', reason_code: 'other' });
      expect([r.status, r.json.error?.details?.[0]?.code]).toEqual([409, 'invalid_state']);
      expect(r.json.error.message).toMatch(/identical/);
      expect(await credits(buyer.live)).toEqual(before);
      expect((await rt.request('GET', `/v1/jobs/${j.id}/files?min_score=1`, { key: buyer.live })).json.data).toEqual([]);
    });

    it('an approval the transaction refuses (the bytes are already approved in this organization) leaves the files tagged verdict=rejected', async () => {
      const buyer = await liveBuyer(rt);
      const bytes = await detailedJpeg(241);
      const first = await createJob(rt, buyer.live, { files_needed: 1, price_per_file_cents: 10 }); // completes: a free tier has one active job
      expect((await submit(first.id, bytes)).sub.status).toBe('approved');
      const second = await createJob(rt, buyer.live, { files_needed: 2, price_per_file_cents: 10, min_width: 1000 });
      const { sub } = await submit(second.id, bytes); // 640 px wide: rejected
      expect(sub.status).toBe('rejected');
      const item = (await db().send(new GetCommand({ TableName: tableName(), Key: keys.submission(sub.id), ConsistentRead: true }))).Item!;
      const [key] = uploadObjectKeys(item as never);
      await waitFor(async () => (await tagsOf(key!)).verdict === 'rejected');
      const r = await override(buyer.live, sub.id, { decision: 'approve', reason_code: 'other' });
      expect([r.status, r.json.error.details[0].code]).toEqual([409, 'invalid_state']);
      expect(r.json.error.message).toMatch(/already approved in this organization/);
      expect(await tagsOf(key!)).toEqual({ verdict: 'rejected' });
    });

    it('override_window_closed: more than 7 days after the verdict', async () => {
      const buyer = await liveBuyer(rt);
      const j = await createJob(rt, buyer.live, { files_needed: 2, price_per_file_cents: 10 });
      const { sub } = await submit(j.id, await detailedJpeg(207));
      clock.advance(7 * DAY_MS + 60_000);
      try {
        const r = await override(buyer.live, sub.id, { decision: 'reject', reason_code: 'low_quality' });
        expect([r.status, r.json.error.details[0].code]).toEqual([409, 'override_window_closed']);
      } finally {
        clock.reset();
      }
      expect(await rows(buyer.live, 'reversal')).toEqual([]);
    });

    it('job_cancelled: a cancelled job\'s verdicts no longer change', async () => {
      const buyer = await liveBuyer(rt);
      const j = await createJob(rt, buyer.live, { files_needed: 2, price_per_file_cents: 10 });
      const { sub } = await submit(j.id, await detailedJpeg(208));
      expect((await rt.request('POST', `/v1/jobs/${j.id}/cancel`, { key: buyer.live, headers: { 'Idempotency-Key': idemKey() } })).status).toBe(200);
      const r = await override(buyer.live, sub.id, { decision: 'reject', reason_code: 'low_quality' });
      expect([r.status, r.json.error.details[0].code]).toEqual([409, 'job_cancelled']);
    });

    it('no_free_slot: approving a rejected submission of a job that is full', async () => {
      const buyer = await liveBuyer(rt);
      const j = await createJob(rt, buyer.live, { files_needed: 1, price_per_file_cents: 10, min_width: 600 });
      const rejected = await submit(j.id, await detailedJpeg(209, 320, 480));
      expect(rejected.sub.status).toBe('rejected');
      expect((await submit(j.id, await detailedJpeg(210))).sub.status).toBe('approved');
      const r = await override(buyer.live, rejected.sub.id, { decision: 'approve' });
      expect([r.status, r.json.error.details[0].code]).toEqual([409, 'no_free_slot']);
      expect(await rows(buyer.live, 'deduction')).toHaveLength(1);
    });
  });

  describe('the request', () => {
    let buyer: Awaited<ReturnType<typeof liveBuyer>>;
    let subId: string;
    beforeAll(async () => {
      buyer = await liveBuyer(rt);
      const j = await createJob(rt, buyer.live, { files_needed: 2, price_per_file_cents: 10 });
      subId = (await submit(j.id, await detailedJpeg(211))).sub.id;
    });

    it('reason_code is required to reject; unknown codes and notes over 500 characters are refused', async () => {
      for (const body of [{ decision: 'reject' }, { decision: 'reject', reason_code: 'ugly' }, { decision: 'reject', reason_code: 'other', note: 'x'.repeat(501) }, { decision: 'maybe' }]) {
        const r = await override(buyer.live, subId, body);
        expect([r.status, r.json.error.type]).toEqual([400, 'validation_error']);
      }
    });

    it('needs an Idempotency-Key, scope jobs:write, and hides other tenants\' submissions (404)', async () => {
      expect((await override(buyer.live, subId, { decision: 'reject', reason_code: 'other' }, null)).status).toBe(400);
      const readOnly = await rt.request('POST', '/v1/api_keys', { key: buyer.live, body: { name: 'ro', scopes: ['jobs:read'] }, headers: { 'Idempotency-Key': idemKey() } });
      expect((await override(readOnly.json.secret, subId, { decision: 'reject', reason_code: 'other' })).status).toBe(403);
      const other = await liveBuyer(rt);
      expect((await override(other.live, subId, { decision: 'reject', reason_code: 'other' })).status).toBe(404);
      expect((await override(buyer.test, subId, { decision: 'reject', reason_code: 'other' })).status).toBe(404);
    });

    it('the same Idempotency-Key replays the first answer and moves money once', async () => {
      const key = idemKey();
      const first = await override(buyer.live, subId, { decision: 'reject', reason_code: 'other' }, key);
      const second = await override(buyer.live, subId, { decision: 'reject', reason_code: 'other' }, key);
      expect([first.status, second.status]).toEqual([200, 200]);
      expect(second.json).toEqual(first.json);
      expect(await rows(buyer.live, 'reversal')).toHaveLength(1);
    });
  });

  it('20 concurrent overrides of one submission: one succeeds, the others are invalid_state, money moves once', async () => {
    const buyer = await liveBuyer(rt);
    const j = await createJob(rt, buyer.live, { files_needed: 1, price_per_file_cents: 10 });
    const { sub } = await submit(j.id, await detailedJpeg(212));
    const before = await credits(buyer.live);
    const answers = await Promise.all(Array.from({ length: 20 }, () => override(buyer.live, sub.id, { decision: 'reject', reason_code: 'low_relevance' })));
    expect(answers.filter((a) => a.status === 200)).toHaveLength(1);
    expect(answers.filter((a) => a.status === 409).map((a) => a.json.error.details[0].code)).toEqual(Array(19).fill('invalid_state'));
    expect(await rows(buyer.live, 'reversal')).toHaveLength(1);
    expect((await credits(buyer.live)).held_cents).toBe(before.held_cents + 10);
    expect(await job(buyer.live, j.id)).toMatchObject({ status: 'in_progress', files_approved: 0 });
    const ev = await waitFor(async () => {
      const e = await events(buyer.live, 'submission.overridden');
      return e.length ? e : null;
    });
    expect(ev).toHaveLength(1);
  });

  it('an override whose transaction meets conflicts past its retries reads the submission again and commits, not a transaction_conflict 409', async () => {
    const buyer = await liveBuyer(rt);
    const j = await createJob(rt, buyer.live, { files_needed: 1, price_per_file_cents: 10 });
    const { sub } = await submit(j.id, await detailedJpeg(213));
    // DynamoDB's answer while other transactions hold the submission: every transaction naming it
    // is cancelled (TransactionConflict) until Tx.commit has used up its retries once.
    const target = keys.submission(sub.id);
    const until = Date.now() + CONTENTION_BUDGET_MS + 1_000;
    let cancelled = 0;
    const remove = cancelTransactionsWhile((input) => Date.now() < until && JSON.stringify(input).includes(JSON.stringify(target.PK)) && ++cancelled > 0);
    try {
      const r = await override(buyer.live, sub.id, { decision: 'reject', reason_code: 'low_relevance' });
      expect([r.status, r.json.status]).toEqual([200, 'rejected']);
    } finally {
      remove();
    }
    expect(cancelled).toBeGreaterThanOrEqual(COMMIT_ATTEMPTS);
    expect(await rows(buyer.live, 'reversal')).toHaveLength(1);
  });

  it('10 concurrent approvals of a rejected submission: one succeeds, the others are invalid_state, and its files stay tagged approved (a loser never re-tags them rejected)', async () => {
    const buyer = await liveBuyer(rt);
    const j = await createJob(rt, buyer.live, { files_needed: 2, price_per_file_cents: 10, min_width: 1000 });
    const { sub } = await submit(j.id, await detailedJpeg(251)); // 640 px wide: rejected
    expect(sub.status).toBe('rejected');
    const item = (await db().send(new GetCommand({ TableName: tableName(), Key: keys.submission(sub.id), ConsistentRead: true }))).Item!;
    const [key] = uploadObjectKeys(item as never);
    await waitFor(async () => (await tagsOf(key!)).verdict === 'rejected');
    const answers = await Promise.all(Array.from({ length: 10 }, () => override(buyer.live, sub.id, { decision: 'approve', reason_code: 'other' })));
    expect(answers.filter((a) => a.status === 200)).toHaveLength(1);
    expect(answers.filter((a) => a.status === 409).map((a) => a.json.error.details[0].code)).toEqual(Array(9).fill('invalid_state'));
    expect(answers.filter((a) => a.status === 409).map((a) => a.json.error.message)).not.toContainEqual(expect.stringMatching(/already approved in this organization/));
    expect(await tagsOf(key!)).toEqual({ verdict: 'approved' });
  });
});
