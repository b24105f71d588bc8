import type { SQSClient } from '@aws-sdk/client-sqs';
import type { SQSEvent } from 'aws-lambda';
import { startTestRuntime, type TestRuntime } from '../support/harness';
import { recordDynamoCalls, type DynamoCall, type DynamoCallRecorder } from '../support/dynamo-calls';
import { accept, createJob, detailedJpeg, liveBuyer, queueClient, signupWorker, sqsRecord, takeMessage, uploadFile } from './support';

// Issue 15 (pipeline cost): the DynamoDB calls one approved image costs, pinned as counts so a
// re-read creeping back into a stage fails here. The consumers run by hand (pollers off) with a
// Lambda context, so every call is attributed to the invocation that made it.
describe('DynamoDB calls per approved submission (one image)', () => {
  let rt: TestRuntime;
  let sqs: SQSClient;
  let rec: DynamoCallRecorder;
  type Consumer = (e: SQSEvent, c: unknown) => Promise<{ batchItemFailures: { itemIdentifier: string }[] }>;
  let score: Consumer;
  let annotate: Consumer;
  let context: (name: string) => unknown;

  beforeAll(async () => {
    process.env.LOCAL_FIXED_OTP = '123456';
    rt = await startTestRuntime({ enablePollers: false, enableStreams: false });
    sqs = queueClient(rt);
    score = (await import('../../functions/pipeline/score')).handler as never;
    annotate = (await import('../../functions/pipeline/annotate')).handler as never;
    const { lambdaContext } = await import('../../local/lambda');
    context = (name) => lambdaContext(name, 120);
    const { currentLogScope } = await import('../../shared/logger');
    rec = recordDynamoCalls({ tag: () => String(currentLogScope().function_name ?? '') });
  });
  afterAll(async () => {
    rec?.stop();
    sqs?.destroy();
    await rt?.stop();
  });



  const commands = (calls: DynamoCall[]) => calls.map((c) => c.command.replace(/Command$/, ''));
  const pkOf = (c: DynamoCall) => String(((c.input.Key as { PK?: unknown } | undefined)?.PK as { S?: string } | undefined)?.S ?? (c.input.Key as { PK?: unknown } | undefined)?.PK ?? '');

  /** Uploads one image and runs the stages in `order`; the calls of each step. */
  async function approveOne(seed: number, order: ['scoring', 'annotation'] | ['annotation', 'scoring']) {
    const buyer = await liveBuyer(rt);
    const job = await createJob(rt, buyer.live, { files_needed: 1 });
    const w = await signupWorker(rt);
    const sub = (await accept(rt, w.token, job.id)).json.id as string;
    const image = await detailedJpeg(seed);

    rec.reset();
    expect((await uploadFile(rt, w.token, sub, image)).status).toBe(202);
    const upload = rec.calls.filter((c) => /upload/i.test(c.tag));
    const bodies = { scoring: await takeMessage(rt, sqs, 'scoring', sub), annotation: await takeMessage(rt, sqs, 'annotation', sub) };
    const steps: Record<string, DynamoCall[]> = {};
    for (const stage of order) {
      rec.reset();
      const run = stage === 'scoring' ? score : annotate;
      const out = await run({ Records: [sqsRecord(bodies[stage], `${stage}-1`)] }, context(`${stage}-consumer`));
      expect(out.batchItemFailures).toEqual([]);
      steps[stage] = rec.calls.filter((c) => c.tag === `${stage}-consumer`);
    }
    const view = await rt.request('GET', `/internal/worker/submissions/${sub}`, { key: w.token });
    expect(view.json.status).toBe('approved');
    return { upload, first: steps[order[0]]!, second: steps[order[1]]! };
  }

  it('upload request: the window and the job in one batch, then the plan and the completion (no re-read, no fan-in read)', async () => {
    const { upload } = await approveOne(101, ['scoring', 'annotation']);
    // Authentication, rate limit and the route's submission read are the API's own (docs/benchmarks.md).
    const own = upload.filter((c) => !/^(SECRET#|RL#)/.test(pkOf(c)) && !(c.command === 'GetItemCommand' && pkOf(c).startsWith('SUB#')));
    expect(commands(own)).toEqual(['BatchGetItem', 'TransactWriteItems', 'TransactWriteItems']);
    expect(upload.length).toBeLessThanOrEqual(6);
  });

  it('scoring then annotation: scoring reads the submission and one batch, writes its part; annotation reads, writes, and decides with one job read and the approval', async () => {
    const { first, second } = await approveOne(102, ['scoring', 'annotation']);
    expect(commands(first)).toEqual(['GetItem', 'BatchGetItem', 'UpdateItem']);
    expect(commands(second)).toEqual(['GetItem', 'UpdateItem', 'GetItem', 'TransactWriteItems']);
  });

  it('annotation then scoring: the same calls, the verdict taken by the scoring stage', async () => {
    const { first, second } = await approveOne(103, ['annotation', 'scoring']);
    expect(commands(first)).toEqual(['GetItem', 'UpdateItem']);
    expect(commands(second)).toEqual(['GetItem', 'BatchGetItem', 'UpdateItem', 'GetItem', 'TransactWriteItems']);
  });

  it('an approved image costs at most 13 DynamoDB calls from upload to verdict (26.5 before issue 15)', async () => {
    const { upload, first, second } = await approveOne(104, ['scoring', 'annotation']);
    expect(upload.length + first.length + second.length).toBeLessThanOrEqual(13);
  });
});
