import type { SQSClient } from '@aws-sdk/client-sqs';
import { startTestRuntime, waitFor, type TestRuntime, indexesCaughtUp } from '../support/harness';
import { injectedScoringFaults, resetInjectedScoringFaults } from '../../shared/scoring/faults';
import { queueByName } from '../../shared/manifest/wiring';
import { redriveMessages } from '../../scripts/redrive';
import { dlqDepth, queueClient, uploadedSubmission } from './support';

// D66 / D64: a scoring provider that fails never strands a submission, approves, rejects or
// charges anything. LOCAL_FAULT_SCORING_FAILURES=N makes the first N scoring attempts fail; the
// message comes back with backoff (1 s here instead of 30 s), and past maxReceiveCount it waits in
// the dead-letter queue until the documented redrive (scripts/redrive.ts) scores it.
describe('pipeline: scoring recovers from provider failures', () => {
  let rt: TestRuntime;
  let sqs: SQSClient;
  beforeAll(async () => {
    process.env.LOCAL_FIXED_OTP = '123456';
    process.env.PIPELINE_RETRY_BASE_SECONDS = '1';
    process.env.PIPELINE_RETRY_MAX_SECONDS = '1';
    rt = await startTestRuntime();
    sqs = queueClient(rt);
  });
  afterEach(() => {
    delete process.env.LOCAL_FAULT_SCORING_FAILURES;
    resetInjectedScoringFaults();
  });
  afterAll(async () => {
    delete process.env.PIPELINE_RETRY_BASE_SECONDS;
    delete process.env.PIPELINE_RETRY_MAX_SECONDS;
    sqs?.destroy();
    await rt?.stop();
  });

  const view = async (token: string, subId: string) => (await rt.request('GET', `/internal/worker/submissions/${subId}`, { key: token })).json;
  const deductions = async (key: string) => (await indexesCaughtUp(), await rt.request('GET', '/v1/billing/transactions?type=deduction&limit=100', { key })).json.data as unknown[];
  const scoredEvents = async (key: string) => ((await indexesCaughtUp(), await rt.request('GET', '/v1/webhook_events?type=submission.scored&limit=100', { key })).json?.data ?? []) as unknown[];
  it('upload → 2 failed scoring attempts → still pending_score, nothing charged → the verdict arrives', async () => {
    resetInjectedScoringFaults();
    process.env.LOCAL_FAULT_SCORING_FAILURES = '2';
    const { buyer, w, subId } = await uploadedSubmission(rt, 201);
    await waitFor(() => injectedScoringFaults() >= 1, { timeoutMs: 60_000, intervalMs: 200 });
    expect((await view(w.token, subId)).status).toBe('pending_score');
    expect(await deductions(buyer.live)).toEqual([]);
    const done = await waitFor(
      async () => {
        const s = await view(w.token, subId);
        return s.status !== 'pending_score' ? s : null;
      },
      { timeoutMs: 90_000, intervalMs: 700 },
    );
    expect(done).toMatchObject({ status: 'approved', reason_codes: [] });
    expect(injectedScoringFaults()).toBe(2);
    await waitFor(async () => (await deductions(buyer.live)).length === 1, { timeoutMs: 20_000 });
  });

  it('past maxReceiveCount the message waits in the DLQ with the submission pending_score; the redrive scores it', async () => {
    const max = queueByName('scoring').maxReceiveCount;
    resetInjectedScoringFaults();
    process.env.LOCAL_FAULT_SCORING_FAILURES = String(max);
    const { buyer, w, subId } = await uploadedSubmission(rt, 202);
    await waitFor(async () => (await dlqDepth(rt, sqs, 'scoring')) >= 1, { timeoutMs: 120_000, intervalMs: 500 });
    expect(injectedScoringFaults()).toBe(max);
    // Parked, not decided: no verdict, no event, no charge.
    expect((await view(w.token, subId)).status).toBe('pending_score');
    expect(await deductions(buyer.live)).toEqual([]);
    expect(await scoredEvents(buyer.live)).toEqual([]);

    expect(await redriveMessages(sqs, rt.queues.get('scoring')!.dlqUrl, rt.queues.get('scoring')!.url)).toBe(1);
    const done = await waitFor(
      async () => {
        const s = await view(w.token, subId);
        return s.status !== 'pending_score' ? s : null;
      },
      { timeoutMs: 90_000, intervalMs: 700 },
    );
    expect(done).toMatchObject({ status: 'approved', reason_codes: [] });
    expect(await dlqDepth(rt, sqs, 'scoring')).toBe(0);
  });
});
