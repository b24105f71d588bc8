/**
 * The sandbox (D40, D53): a test key runs the whole marketplace with simulated workers, through
 * the same S3-triggered pipeline and approval transaction as live, without moving money.
 */
import { createHash } from 'node:crypto';
import { createHmac } from 'node:crypto';
import { Webhook } from 'standardwebhooks';
import { startTestRuntime, waitFor, type TestRuntime, indexesCaughtUp } from '../support/harness';
import { signupBuyer, idemKey, type TestBuyer } from '../support/buyers';
import { startDevReceiver, type DevReceiver } from '../../shared/webhooks/dev-receiver';
import { verifyWebhook } from '../../shared/webhooks/verify';

let rt: TestRuntime;
let rx: DevReceiver;

beforeAll(async () => {
  process.env.SANDBOX_DELAY_SECONDS = '1';
  rt = await startTestRuntime();
  rx = await startDevReceiver();
});
afterAll(async () => {
  await rx?.close();
  await rt?.stop();
  delete process.env.SANDBOX_DELAY_SECONDS;
});

const post = (path: string, key: string, body?: unknown) => rt.request('POST', path, { key, body, headers: { 'Idempotency-Key': idemKey() } });

const jobBody = (extra: Record<string, unknown> = {}) => ({
  type: 'data_collection',
  title: 'Sandbox run',
  description: 'Photos of colourful shapes for a sandbox integration test',
  files_needed: 3,
  accepted_formats: ['image/jpeg'],
  price_per_file_cents: 25,
  ...extra,
});

async function waitForStatus(key: string, jobId: string, statuses: string[], timeoutMs = 90_000) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const r = await rt.request('GET', `/v1/jobs/${jobId}`, { key, headers: { Prefer: 'wait=20' } });
    expect(r.status).toBe(200);
    if (statuses.includes(r.json.status)) return r.json;
    if (Date.now() > deadline) throw new Error(`job ${jobId} still ${r.json.status}`);
  }
}

async function testBalance(key: string) {
  return (await rt.request('GET', '/v1/billing/credits', { key })).json;
}

describe('sandbox end to end (D40)', () => {
  let buyer: TestBuyer;
  let secret: string;
  let jobId: string;
  let done: Record<string, unknown>;

  beforeAll(async () => {
    buyer = await signupBuyer(rt, 'Sandbox Co');
    const ep = await post('/v1/webhook_endpoints', buyer.test, {
      url: `${rx.url}/sandbox`,
      description: 'sandbox receiver',
      events: ['submission.approved', 'submission.scored', 'job.completed'],
    });
    expect(ep.status).toBe(201);
    secret = ep.json.secret;
    const job = await post('/v1/jobs', buyer.test, jobBody());
    expect(job.status).toBe(201);
    jobId = job.json.id;
    done = await waitForStatus(buyer.test, jobId, ['completed']);
  }, 120_000);

  test('a test-key job with 3 files completes with 3 approved files', () => {
    expect(done).toMatchObject({ status: 'completed', files_approved: 3, files_remaining: 0, environment: 'test' });
  });

  test('the files download, their bytes hash to content_hash, and they carry annotations', async () => {
    const r = await rt.request('GET', `/v1/jobs/${jobId}/files`, { key: buyer.test });
    expect(r.status).toBe(200);
    expect(r.json.data).toHaveLength(3);
    const hashes = new Set<string>();
    for (const f of r.json.data) {
      expect(f.ai_star_rating).toBe(4);
      const bytes = Buffer.from(await (await fetch(f.download_url)).arrayBuffer());
      expect(`sha256:${createHash('sha256').update(bytes).digest('hex')}`).toBe(f.content_hash);
      hashes.add(f.content_hash);
      expect(f.annotations).toMatchObject({ type: 'image' });
      expect(f.annotations.color_palette.length).toBeGreaterThan(0);
      expect(f.width).toBe(1600);
    }
    expect(hashes.size).toBe(3); // D53: unique bytes, no false duplicates
  });

  test('submission.approved, submission.scored and job.completed arrive, signed like live events', async () => {
    // Events of each type, counted once each: delivery is at least once, so one may come twice.
    const ofType = (type: string) => new Set(rx.at('/sandbox').filter((d) => d.event.type === type).map((d) => d.event.id)).size;
    await waitFor(() => ofType('submission.approved') === 3 && ofType('submission.scored') === 3 && ofType('job.completed') === 1, { timeoutMs: 30_000 });
    const wh = new Webhook(secret.replace(/^whsec_/, ''));
    for (const d of rx.at('/sandbox')) {
      const hex = createHmac('sha256', secret).update(d.rawBody).digest('hex');
      expect(d.headers['x-service-signature']).toBe(hex);
      expect(() => wh.verify(d.rawBody, d.headers as Record<string, string>)).not.toThrow();
      expect((verifyWebhook(d.rawBody, d.headers as Record<string, string>, secret).event as { id: string }).id).toBe(d.event.id);
      expect(d.event).toMatchObject({ object: 'event', environment: 'test', api_version: '2026-03-18' });
    }
    const completed = rx.at('/sandbox').find((d) => d.event.type === 'job.completed')!;
    expect(completed.event.data).toMatchObject({ job_id: jobId, files_approved: 3, files_needed: 3 });
    const scored = rx.at('/sandbox').find((d) => d.event.type === 'submission.scored')!;
    expect(scored.event.data).toMatchObject({ status: 'approved', ai_star_rating: 4, dimensions: { relevance: 4, quality: 4, instruction_compliance: 4 } });
  });

  test('no money moves: the test balance stays 0 and has no transactions (D3)', async () => {
    expect(await testBalance(buyer.test)).toMatchObject({ available_cents: 0, held_cents: 0, total_cents: 0 });
    const tx = await rt.request('GET', '/v1/billing/transactions', { key: buyer.test });
    expect(tx.json.data).toEqual([]);
  });

  test('sandbox data is invisible to live keys (D3)', async () => {
    expect((await rt.request('GET', `/v1/jobs/${jobId}`, { key: buyer.live })).status).toBe(404);
  });
});

describe('sandbox scenarios (docs/sandbox.md)', () => {
  test('mixed: a 2-star retry, a duplicate and a rejection happen, and the job still completes', async () => {
    const buyer = await signupBuyer(rt, 'Mixed Co');
    const job = await post('/v1/jobs', buyer.test, jobBody({ files_needed: 4, metadata: { sandbox_scenario: 'mixed' } }));
    expect(job.status).toBe(201);
    const done = await waitForStatus(buyer.test, job.json.id, ['completed'], 120_000);
    expect(done.files_approved).toBe(4);
    await indexesCaughtUp(); // the lists below read indexes
    const subs = await rt.request('GET', `/v1/jobs/${job.json.id}/submissions?limit=100`, { key: buyer.test });
    const all = subs.json.data as { status: string; ai_star_rating: number; ai_reasoning: string }[];
    expect(all.filter((s) => s.status === 'approved')).toHaveLength(4);
    const rejected = all.filter((s) => s.status === 'rejected');
    expect(rejected.some((s) => s.ai_star_rating === 1 && /duplicate|identical/i.test(s.ai_reasoning))).toBe(true);
    expect(rejected.some((s) => s.ai_star_rating === 1 && /sandbox scenario/i.test(s.ai_reasoning))).toBe(true);
    const events = await rt.request('GET', '/v1/webhook_events?type=submission.scored&limit=100', { key: buyer.test });
    const statuses = events.json.data
      .filter((e: { data: { job_id: string } }) => e.data.job_id === job.json.id)
      .map((e: { data: { status: string } }) => e.data.status);
    expect(statuses).toContain('retry_pending'); // D47
    expect((await testBalance(buyer.test)).available_cents).toBe(0);
  }, 150_000);

  test('slow: uploads are spread out, one per tick', async () => {
    const buyer = await signupBuyer(rt, 'Slow Co');
    const job = await post('/v1/jobs', buyer.test, jobBody({ files_needed: 2, metadata: { sandbox_scenario: 'slow' } }));
    // After the first tick exactly one submission exists; the second waits for a later tick.
    await waitFor(async () => {
      const subs = await rt.request('GET', `/v1/jobs/${job.json.id}/submissions`, { key: buyer.test });
      return subs.json.data.length === 1;
    }, { timeoutMs: 30_000, intervalMs: 1000 }); // D13: polls stay under the free tier's 60/min
    const early = await rt.request('GET', `/v1/jobs/${job.json.id}`, { key: buyer.test });
    expect(early.json.files_approved).toBeLessThanOrEqual(1);
  });

  test('a job whose files_needed is not a multiple of files_per_submission completes: the last submission takes the slots left', async () => {
    const buyer = await signupBuyer(rt, 'Odd Co');
    const job = await post('/v1/jobs', buyer.test, jobBody({ files_needed: 3, files_per_submission: 2 }));
    expect(job.status).toBe(201);
    expect(await waitForStatus(buyer.test, job.json.id, ['completed'], 60_000)).toMatchObject({ status: 'completed', files_approved: 3 });
  }, 90_000);

  test('a job whose threshold is above the sandbox 4 stars never completes; the simulator gives up (D53)', async () => {
    const buyer = await signupBuyer(rt, 'Strict Co');
    const job = await post('/v1/jobs', buyer.test, jobBody({ files_needed: 1, min_star_rating: 5 }));
    expect(job.status).toBe(201);
    await waitFor(async () => {
      const subs = await rt.request('GET', `/v1/jobs/${job.json.id}/submissions?limit=100`, { key: buyer.test });
      return subs.json.data.length === 3 && subs.json.data.every((s: { status: string }) => s.status === 'rejected');
    }, { timeoutMs: 60_000, intervalMs: 1000 });
    // The chain has ended: no fourth attempt follows.
    const state = await rt.request('GET', `/v1/jobs/${job.json.id}/submissions?limit=100`, { key: buyer.test });
    expect(state.json.data).toHaveLength(3);
    const j = await rt.request('GET', `/v1/jobs/${job.json.id}`, { key: buyer.test });
    expect(j.json.status).not.toBe('completed');
  }, 90_000);
});
