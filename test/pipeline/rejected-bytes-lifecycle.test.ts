import { GetObjectTaggingCommand, ListObjectsV2Command, S3Client } from '@aws-sdk/client-s3';
import { S3_LOCAL_CREDENTIALS } from '../../local/s3';
import { startTestRuntime, waitFor, type TestRuntime } from '../support/harness';
import { accept, annotationsRecorded, createJob, detailedJpeg, flatPng, liveBuyer, signupWorker, uploadFile, waitForVerdict } from './support';
import { scoreObject } from '../../shared/work/scoring-stage';
import { StsClient } from '../../shared/aws/sts';
import { beforeFirstTransaction } from '../support/transaction-conflicts';
import { randomBytes } from 'node:crypto';
import { UpdateCommand } from '@aws-sdk/lib-dynamodb';
import { db, tableName } from '../../shared/db/client';
import { keys } from '../../shared/db/keys';
import { annotateObject } from '../../shared/work/annotation-stage';
import { getSubmissionItem } from '../../shared/work/reservations';

// Issue 13 lifecycle: a rejected submission's bytes carry `verdict=rejected`, which the bucket's
// lifecycle rule expires after the override window (D71 keeps them 7 days); an override that
// approves them re-tags them `approved`, so the rule never deletes an approved file.
describe('pipeline: rejected bytes are tagged for the lifecycle rule, approved ones are not', () => {
  let rt: TestRuntime;
  let s3: S3Client;
  beforeAll(async () => {
    process.env.LOCAL_FIXED_OTP = '123456';
    rt = await startTestRuntime();
    s3 = new S3Client({ endpoint: rt.s3Endpoint, forcePathStyle: true, region: 'us-east-1', credentials: S3_LOCAL_CREDENTIALS, requestChecksumCalculation: 'WHEN_REQUIRED' });
  });
  afterAll(async () => {
    s3?.destroy();
    await rt?.stop();
  });

  async function tagsOf(subId: string): Promise<Record<string, string>[]> {
    const listed = await s3.send(new ListObjectsV2Command({ Bucket: rt.bucketName, Prefix: `uploads/${subId}/` }));
    const keys = (listed.Contents ?? []).map((o) => o.Key!);
    return Promise.all(
      keys.map(async (Key) => {
        const t = await s3.send(new GetObjectTaggingCommand({ Bucket: rt.bucketName, Key }));
        return Object.fromEntries((t.TagSet ?? []).map((x) => [x.Key!, x.Value!]));
      }),
    );
  }

  it('a rejected upload is tagged verdict=rejected; approving it by override re-tags it verdict=approved', async () => {
    const b = await liveBuyer(rt);
    const job = await createJob(rt, b.live, { files_needed: 1 });
    const w = await signupWorker(rt);
    const a = await accept(rt, w.token, job.id);
    expect((await uploadFile(rt, w.token, a.json.id, await flatPng(), 'image/png', 'flat.png')).status).toBe(202);
    await waitFor(
      async () => (await rt.request('GET', `/internal/worker/submissions/${a.json.id}`, { key: w.token })).json?.status === 'rejected',
      { timeoutMs: 90_000, intervalMs: 700 },
    );
    const rejected = await waitFor(async () => {
      const tags = await tagsOf(a.json.id);
      return tags.length === 1 && tags[0]!.verdict === 'rejected' ? tags : null;
    });
    expect(rejected).toEqual([{ verdict: 'rejected' }]);
    await annotationsRecorded(a.json.id);

    const o = await rt.request('POST', `/v1/submissions/${a.json.id}/override`, {
      key: b.live,
      headers: { 'Idempotency-Key': `ov-${a.json.id}` },
      body: { decision: 'approve', reason_code: 'other' },
    });
    expect(o.status).toBe(200);
    expect(await tagsOf(a.json.id)).toEqual([{ verdict: 'approved' }]);
  });

  /** A plan of two pre-signed files with only the first sent: the round stays open, its one object landed. */
  async function halfSentPlan() {
    const b = await liveBuyer(rt);
    const job = await createJob(rt, b.live, { files_needed: 2, files_per_submission: 2 });
    const w = await signupWorker(rt);
    const a = await accept(rt, w.token, job.id);
    const bytes = await detailedJpeg(402);
    const plan = await rt.request('POST', `/internal/worker/submissions/${a.json.id}/upload`, {
      key: w.token,
      body: { files: [{ filename: 'a.jpg', content_type: 'image/jpeg', size_bytes: bytes.length }, { filename: 'b.jpg', content_type: 'image/jpeg', size_bytes: bytes.length }] },
    });
    expect(plan.status).toBe(200);
    expect((await fetch(plan.json.uploads[0].url, { method: 'PUT', body: bytes, headers: plan.json.uploads[0].headers })).status).toBe(200);
    return { job, w, subId: a.json.id as string, bytes };
  }

  it('a plan whose URLs cannot be signed (STS refuses the upload-signing role) writes nothing: the worker asks again and gets one', async () => {
    const b = await liveBuyer(rt);
    const job = await createJob(rt, b.live, { files_needed: 1 });
    const w = await signupWorker(rt);
    const a = await accept(rt, w.token, job.id);
    const body = { files: [{ filename: 'a.jpg', content_type: 'image/jpeg', size_bytes: 1234 }] };
    const refused = jest.spyOn(StsClient.prototype, 'assumeRole').mockRejectedValue(Object.assign(new Error('Rate exceeded'), { name: 'Throttling', $metadata: { httpStatusCode: 400 } }));
    try {
      const r = await rt.request('POST', `/internal/worker/submissions/${a.json.id}/upload`, { key: w.token, body });
      expect([r.status, r.json.error.type, r.json.error.details[0].code, r.headers['retry-after']]).toEqual([503, 'service_unavailable', 'upload_signing_unavailable', '5']);
    } finally {
      refused.mockRestore();
    }
    const sub = (await rt.request('GET', `/internal/worker/submissions/${a.json.id}`, { key: w.token })).json;
    expect(sub).toMatchObject({ status: 'awaiting_upload', files: [] });
    const again = await rt.request('POST', `/internal/worker/submissions/${a.json.id}/upload`, { key: w.token, body });
    expect(again.status).toBe(200);
    expect(again.json.uploads).toHaveLength(1);
  });

  it('bytes that landed in a reservation the worker withdrew from are tagged verdict=rejected: nothing delivers them', async () => {
    const { job, w, subId } = await halfSentPlan();
    expect((await rt.request('POST', `/internal/worker/jobs/${job.id}/withdraw`, { key: w.token })).status).toBe(200);
    expect(await tagsOf(subId)).toEqual([{ verdict: 'rejected' }]);
  });

  it('bytes of a plan that a new plan replaced are tagged verdict=rejected', async () => {
    const { w, subId, bytes } = await halfSentPlan();
    const replan = await rt.request('POST', `/internal/worker/submissions/${subId}/upload`, { key: w.token, body: { files: [{ filename: 'c.jpg', content_type: 'image/jpeg', size_bytes: bytes.length }] } });
    expect(replan.status).toBe(200);
    expect(await tagsOf(subId)).toEqual([{ verdict: 'rejected' }]); // the old round's object; the new one has none yet
  });

  it('a plan made on a stale read of the submission (another plan was written meanwhile) is 409: the other plan is never replaced unseen', async () => {
    const { w, subId, bytes } = await halfSentPlan();
    const planOf = (filename: string) => rt.request('POST', `/internal/worker/submissions/${subId}/upload`, { key: w.token, body: { files: [{ filename, content_type: 'image/jpeg', size_bytes: bytes.length }] } });
    const other = beforeFirstTransaction(
      (input) => JSON.stringify(input).includes('stale.jpg'),
      async () => expect((await planOf('meanwhile.jpg')).status).toBe(200),
    );
    let stale;
    try {
      stale = await planOf('stale.jpg');
    } finally {
      other.remove();
    }
    expect(other.fired()).toBe(true);
    expect([stale.status, stale.json.error?.details?.[0]?.code]).toEqual([409, 'submission_changed']);
    const sub = await getSubmissionItem(subId);
    expect(sub!.uploads.map((u) => u.filename)).toEqual(['meanwhile.jpg']);
  });

  it('a worker coordinate too close to zero for the table (1e-300) is 400 on its field, never a 500 at the write', async () => {
    const b = await liveBuyer(rt);
    const job = await createJob(rt, b.live, { files_needed: 1 });
    const w = await signupWorker(rt);
    const a = await accept(rt, w.token, job.id);
    const body = { files: [{ filename: 'a.jpg', content_type: 'image/jpeg', size_bytes: 1234 }], latitude: 1e-300, longitude: 1 };
    const r = await rt.request('POST', `/internal/worker/submissions/${a.json.id}/upload`, { key: w.token, body });
    expect(r.status).toBe(400);
    expect(r.json.error.details).toEqual([expect.objectContaining({ field: 'latitude' })]);
  });

  it('a pre-signed file refused by its byte check (its object deleted) is not annotated: the annotation stage answers refused, never a failure bound for the dead-letter queue', async () => {
    const b = await liveBuyer(rt);
    const job = await createJob(rt, b.live, { files_needed: 1 });
    const w = await signupWorker(rt);
    const a = await accept(rt, w.token, job.id);
    const garbage = randomBytes(4096); // declared a JPEG, no JPEG's magic bytes
    const plan = await rt.request('POST', `/internal/worker/submissions/${a.json.id}/upload`, {
      key: w.token,
      body: { files: [{ filename: 'a.jpg', content_type: 'image/jpeg', size_bytes: garbage.length }] },
    });
    expect(plan.status).toBe(200);
    expect((await fetch(plan.json.uploads[0].url, { method: 'PUT', body: garbage, headers: plan.json.uploads[0].headers })).status).toBe(200);
    const refused = await waitFor(async () => {
      const sub = await getSubmissionItem(a.json.id);
      const part = sub?.parts[sub.uploads[0]!.file_id];
      return part?.upload_error ? sub : null;
    }, { timeoutMs: 60_000 });
    const { key, file_id: fileId } = refused!.uploads[0]!;
    // Whatever the annotation stage did meanwhile, its delivery after the refusal finds no annotation yet.
    await db().send(new UpdateCommand({ TableName: tableName(), Key: keys.submission(a.json.id), UpdateExpression: 'REMOVE parts.#f.annotations', ExpressionAttributeNames: { '#f': fileId } }));
    expect(await annotateObject(key)).toBe('refused');
  });

  it('a late or repeated event of a delivered file never tags it: only bytes no submission delivers are tagged', async () => {
    const b = await liveBuyer(rt);
    const job = await createJob(rt, b.live, { files_needed: 1 });
    const w = await signupWorker(rt);
    const a = await accept(rt, w.token, job.id);
    expect((await uploadFile(rt, w.token, a.json.id, await detailedJpeg(401))).status).toBe(202);
    expect((await waitForVerdict(rt, w.token, a.json.id)).status).toBe('approved');
    const listed = await s3.send(new ListObjectsV2Command({ Bucket: rt.bucketName, Prefix: `uploads/${a.json.id}/` }));
    const key = listed.Contents![0]!.Key!;
    expect(await scoreObject(key)).toBe('ignored');
    expect(await tagsOf(a.json.id)).toEqual([{}]);
  });
});
