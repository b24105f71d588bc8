import type { SQSClient } from '@aws-sdk/client-sqs';
import { startTestRuntime, waitFor, type TestRuntime } from '../support/harness';
import { queueByName } from '../../shared/manifest/wiring';
import { dlqDepth, queueClient, uploadedSubmission, waitForVerdict } from './support';

// The local runtime runs the image models in worker threads (local/model-pool.ts). A worker that
// dies mid-annotation is not a verdict on the file: the consumer invocation fails, its message
// comes back (and past maxReceiveCount waits in the DLQ); the file is never recorded unannotated.
describe('pipeline: a model worker that dies never loses the annotation', () => {
  let rt: TestRuntime;
  let sqs: SQSClient;
  beforeAll(async () => {
    process.env.LOCAL_FIXED_OTP = '123456';
    process.env.PIPELINE_RETRY_BASE_SECONDS = '1';
    process.env.PIPELINE_RETRY_MAX_SECONDS = '1';
    rt = await startTestRuntime({ modelWorkers: 1 });
    sqs = queueClient(rt);
  });
  afterAll(async () => {
    delete process.env.PIPELINE_RETRY_BASE_SECONDS;
    delete process.env.PIPELINE_RETRY_MAX_SECONDS;
    sqs?.destroy();
    await rt?.stop();
  });

  it('the runtime runs the models in its worker threads', () => {
    expect(rt.modelWorkers?.size).toBe(1);
  });

  it('a worker dies while annotating: the message comes back, a fresh worker annotates it, the file is approved with its annotations', async () => {
    const deaths = rt.modelWorkers!.deaths;
    rt.modelWorkers!.crashNext('measureImageFacts', 1);
    const { buyer, job, w, subId } = await uploadedSubmission(rt, 301);
    const done = await waitForVerdict(rt, w.token, subId);
    expect(rt.modelWorkers!.deaths).toBe(deaths + 1);
    expect(done.status).toBe('approved');
    const files = await rt.request('GET', `/v1/jobs/${job.id}/files`, { key: buyer.live });
    expect(files.json.data[0].annotations).toMatchObject({ type: 'image', width: 640, height: 480, face_count: expect.any(Number) });
  });

  it('a worker that dies on every receive parks the message in the DLQ; the submission waits in pending_score', async () => {
    const max = queueByName('annotation').maxReceiveCount;
    const deaths = rt.modelWorkers!.deaths;
    rt.modelWorkers!.crashNext('measureImageFacts', max);
    const { w, subId } = await uploadedSubmission(rt, 302);
    await waitFor(async () => (await dlqDepth(rt, sqs, 'annotation')) >= 1, { timeoutMs: 120_000, intervalMs: 500 });
    expect(rt.modelWorkers!.deaths).toBe(deaths + max);
    expect((await rt.request('GET', `/internal/worker/submissions/${subId}`, { key: w.token })).json.status).toBe('pending_score');
  });
});
