import type { SQSClient } from '@aws-sdk/client-sqs';
import type { SQSEvent } from 'aws-lambda';
import { startTestRuntime, type TestRuntime } from '../support/harness';
import { setNsfwModel } from '../../shared/media/annotation/models';
import { accept, createJob, detailedJpeg, liveBuyer, queueClient, signupWorker, sqsRecord, takeMessage, uploadFile } from './support';

/** While set, loading the face/object models (and with them the tfjs engine) fails with this. */
let mockHumanLoadFailure: Error | null = null;
jest.mock('../../shared/media/annotation/models', () => {
  const actual = jest.requireActual('../../shared/media/annotation/models');
  return { ...actual, loadHuman: () => (mockHumanLoadFailure ? Promise.reject(mockHumanLoadFailure) : actual.loadHuman()) };
});

const moduleMissing = (what: string) => Object.assign(new Error(`Cannot find module '${what}'`), { code: 'MODULE_NOT_FOUND' });
const outOfMemory = () => Object.assign(new Error('ENOMEM: not enough memory, allocating the input tensor'), { code: 'ENOMEM' });

// The content policy (NSFW score ≥ 0.85 is rejected) never fails open. A detector that cannot run
// for the machinery (its model does not load, the memory runs out) is no fact about the image: the
// annotation step fails and its message comes back (then waits in the dead-letter queue), and the
// file gets no verdict until the policy could be checked. Consumers run by hand.
describe('the content policy is never skipped because a detector could not run', () => {
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
  afterEach(() => {
    mockHumanLoadFailure = null;
    setNsfwModel(null);
  });
  afterAll(async () => {
    sqs?.destroy();
    await rt?.stop();
  });

  /** A detailed JPEG the local scorer approves, scored already: only the annotation step is left. */
  async function scoredImage(seed: number) {
    const buyer = await liveBuyer(rt);
    const job = await createJob(rt, buyer.live, { files_needed: 1 });
    const w = await signupWorker(rt);
    const sub = (await accept(rt, w.token, job.id)).json.id as string;
    expect((await uploadFile(rt, w.token, sub, await detailedJpeg(seed), 'image/jpeg', 'shop.jpg')).status).toBe(202);
    expect((await score({ Records: [sqsRecord(await takeMessage(rt, sqs, 'scoring', sub), 's')] })).batchItemFailures).toEqual([]);
    return { buyer, job, w, sub, annotation: await takeMessage(rt, sqs, 'annotation', sub) };
  }
  type Scored = Awaited<ReturnType<typeof scoredImage>>;

  async function expectStillWaitingUnannotated(t: Scored) {
    const { getSubmissionItem } = await import('../../shared/work/reservations');
    const item = (await getSubmissionItem(t.sub))!;
    expect(item.status).toBe('pending_score');
    expect(item.parts[item.uploads[0]!.file_id]).not.toHaveProperty('annotations');
  }

  /** The message comes back with the model running again: the policy is checked and the file approved. */
  async function expectCheckedOnRedelivery(t: Scored) {
    setNsfwModel({ classify: async () => [{ className: 'Neutral', probability: 0.98 }, { className: 'Porn', probability: 0.02 }] });
    expect((await annotate({ Records: [sqsRecord(t.annotation, 'a2')] })).batchItemFailures).toEqual([]);
    expect((await rt.request('GET', `/internal/worker/submissions/${t.sub}`, { key: t.w.token })).json.status).toBe('approved');
    const file = (await rt.request('GET', `/v1/jobs/${t.job.id}/files?min_score=1`, { key: t.buyer.live })).json.data[0];
    expect(file.annotations.safety.nsfw_score).toEqual(expect.any(Number));
  }

  it('an NSFW classifier that runs out of memory fails the annotation step: no verdict without the policy check', async () => {
    const t = await scoredImage(911);
    setNsfwModel({ classify: async () => Promise.reject(outOfMemory()) });
    expect((await annotate({ Records: [sqsRecord(t.annotation, 'a1')] })).batchItemFailures).toHaveLength(1);
    await expectStillWaitingUnannotated(t);
    await expectCheckedOnRedelivery(t);
  });

  it('face, object and NSFW models whose module does not load fail the annotation step: no verdict without the policy check', async () => {
    const t = await scoredImage(912);
    mockHumanLoadFailure = moduleMissing('@vladmandic/human');
    expect((await annotate({ Records: [sqsRecord(t.annotation, 'a1')] })).batchItemFailures).toHaveLength(1);
    await expectStillWaitingUnannotated(t);
    mockHumanLoadFailure = null;
    await expectCheckedOnRedelivery(t);
  });

  it('a model load that fails without an errno (a tfjs backend that did not initialise) fails the step too: a model that does not load is never about the image', async () => {
    const t = await scoredImage(913);
    mockHumanLoadFailure = new Error('tfjs backend is cpu, expected wasm');
    expect((await annotate({ Records: [sqsRecord(t.annotation, 'a1')] })).batchItemFailures).toHaveLength(1);
    await expectStillWaitingUnannotated(t);
    mockHumanLoadFailure = null;
    await expectCheckedOnRedelivery(t);
  });

  it('an NSFW classifier that fails without an errno fails the step: the policy is never skipped', async () => {
    const t = await scoredImage(914);
    setNsfwModel({ classify: async () => Promise.reject(new Error('Tensor is disposed.')) });
    expect((await annotate({ Records: [sqsRecord(t.annotation, 'a1')] })).batchItemFailures).toHaveLength(1);
    await expectStillWaitingUnannotated(t);
    await expectCheckedOnRedelivery(t);
  });
});
