import type { SQSClient } from '@aws-sdk/client-sqs';
import type { SQSEvent } from 'aws-lambda';
import { startTestRuntime, type TestRuntime, indexesCaughtUp } from '../support/harness';
import { accept, createJob, detailedJpeg, liveBuyer, queueClient, signupWorker, sqsRecord, takeMessage, uploadFile } from './support';

// D54 idempotency: the consumers run here by hand (pollers off), so one S3 event can be delivered
// to each stage twice at the same moment, and again after the verdict.
describe('pipeline consumers: duplicated S3 events and poison messages', () => {
  let rt: TestRuntime;
  let sqs: SQSClient;
  let score: (e: SQSEvent) => Promise<{ batchItemFailures: { itemIdentifier: string }[] }>;
  let annotate: typeof score;

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



  it('D54: the same S3 event delivered twice to both stages yields one verdict, one File and one charge', async () => {
    const buyer = await liveBuyer(rt);
    const job = await createJob(rt, buyer.live, { files_needed: 1 });
    const w = await signupWorker(rt);
    const a = await accept(rt, w.token, job.id);
    expect((await uploadFile(rt, w.token, a.json.id, await detailedJpeg(5))).status).toBe(202);
    const scoringBody = await takeMessage(rt, sqs, 'scoring');
    const annotationBody = await takeMessage(rt, sqs, 'annotation');
    expect(JSON.parse(scoringBody).detail.object.key).toMatch(new RegExp(`^uploads/${a.json.id}/`));

    const results = await Promise.all([
      score({ Records: [sqsRecord(scoringBody, 's1')] }),
      score({ Records: [sqsRecord(scoringBody, 's2')] }),
      annotate({ Records: [sqsRecord(annotationBody, 'a1')] }),
      annotate({ Records: [sqsRecord(annotationBody, 'a2')] }),
    ]);
    expect(results.flatMap((r) => r.batchItemFailures)).toEqual([]);
    // A third delivery after the verdict changes nothing either.
    await Promise.all([score({ Records: [sqsRecord(scoringBody, 's3')] }), annotate({ Records: [sqsRecord(annotationBody, 'a3')] })]);

    const sub = await rt.request('GET', `/internal/worker/submissions/${a.json.id}`, { key: w.token });
    expect(sub.json.status).toBe('approved');
    await indexesCaughtUp();
    const tx = await rt.request('GET', '/v1/billing/transactions?type=deduction', { key: buyer.live });
    expect(tx.json.data).toHaveLength(1);
    const files = await rt.request('GET', `/v1/jobs/${job.id}/files`, { key: buyer.live });
    expect(files.json.data).toHaveLength(1);
    const events = await rt.request('GET', '/v1/webhook_events?type=submission.approved', { key: buyer.live });
    expect(events.json.data).toHaveLength(1);
    expect((await rt.request('GET', `/v1/jobs/${job.id}`, { key: buyer.live })).json).toMatchObject({ status: 'completed', files_approved: 1 });
  });

  it('a poison message is reported as a partial batch failure (so it ends in the DLQ); unknown keys are acknowledged', async () => {
    const unknownKey = JSON.stringify({ 'detail-type': 'Object Created', source: 'aws.s3', detail: { bucket: { name: rt.bucketName }, object: { key: 'uploads/not-ours.jpg', size: 1 } } });
    const staleSub = JSON.stringify({ 'detail-type': 'Object Created', source: 'aws.s3', detail: { object: { key: 'uploads/sub_01JZZZZZZZZZZZZZZZZZZZZZZZ/abc/file_01JZZZZZZZZZZZZZZZZZZZZZZZ.jpg' } } });
    for (const h of [score, annotate]) {
      const out = await h({ Records: [sqsRecord('not json', 'poison'), sqsRecord('{"detail-type":"Object Deleted"}', 'wrong'), sqsRecord(unknownKey, 'ok1'), sqsRecord(staleSub, 'ok2')] });
      expect(out.batchItemFailures.map((f) => f.itemIdentifier).sort()).toEqual(['poison', 'wrong']);
    }
  });
});
