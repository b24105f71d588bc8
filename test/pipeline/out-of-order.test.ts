/**
 * A standard SQS queue's ordering is best effort: messages may arrive, and a batch may hold them,
 * in another order than they were sent. Here every queue of the stack hands its batches over
 * shuffled and holds some messages back behind later ones (the runtime's `outOfOrderDeliveries`,
 * seeded); the flow below goes through the scoring, annotation, webhooks, exports, cancellations
 * and sandbox queues, and must come out as the contract promises whatever the order
 * (D54, D31, D37): one verdict, File, charge and payout per submission, the job's counters and
 * the balance's identities right, one event per state change, each delivered to every endpoint
 * (retries included), one export with every File, and a sandbox run that completes.
 * docs/webhooks.md promises no order of events ("use created_at and the resource's own state"):
 * so the test holds the events' created_at to the order of the changes, not their arrival.
 */
import { randomUUID } from 'node:crypto';
import { seededRandom } from '../../local/seeded-random';
import { waitFor } from '../support/harness';
import { accept, createJob, detailedJpeg, flatPng, flowSuite, liveBuyer, signupWorker, uploadFile, waitForVerdict } from './support';

jest.setTimeout(300_000);

type Tx = { type: string; amount_cents: number; job_id?: string | null; submission_id?: string | null };
type Ev = { id: string; type: string; created_at: string; data: Record<string, unknown>; delivery_status: string; deliveries: { endpoint_id: string; status: string; attempts: number }[] };

describe('every queue delivering out of order changes nothing the contract promises', () => {
  const flow = flowSuite({ outOfOrderDeliveries: { random: seededRandom(20261127), holdBackProbability: 0.4, maxHoldBackSeconds: 2 } }, { WEBHOOK_RETRY_SCALE: '0.001' });
  const post = flow.post;
  const get = async (key: string, path: string) => (await flow.rt.request('GET', path, { key })).json;
  const allEvents = async (key: string): Promise<Ev[]> => (await get(key, '/v1/webhook_events?limit=100')).data;
  const transactions = async (key: string): Promise<Tx[]> => (await get(key, '/v1/billing/transactions?limit=100')).data;
  const sum = (txs: Tx[], ...types: string[]) => txs.filter((t) => types.includes(t.type)).reduce((s, t) => s + t.amount_cents, 0);

  it('a live buyer: three jobs (one filled, a retried submission among them; one cancelled mid-way; one submission of two files), an export, webhooks to two endpoints (one failing at first); and a sandbox run', async () => {
    const buyer = await liveBuyer(flow.rt);
    const hookA = `/hook/${randomUUID()}`;
    const hookB = `/hook/${randomUUID()}`;
    // B fails its first answers: those deliveries are retried, so retry messages share the queue
    // with new events' fan-outs.
    flow.rx.script(hookB, [500, 503, 500, 500, 200]);
    const endpoints: string[] = [];
    for (const hook of [hookA, hookB]) {
      const ep = await post(buyer.live, '/v1/webhook_endpoints', { url: `${flow.rx.url}${hook}`, events: ['*'] });
      expect(ep.status).toBe(201);
      endpoints.push(ep.json.id as string);
    }
    const before = await get(buyer.live, '/v1/billing/credits');

    // Job 1: four files; four workers upload at once (their scoring messages share the queue), one
    // of them a flat picture (retry_pending at min_star_rating 2), retried with a good one.
    const job = await createJob(flow.rt, buyer.live, { files_needed: 4, price_per_file_cents: 10, min_star_rating: 2 });
    const workers = await Promise.all([1, 2, 3, 4].map(() => signupWorker(flow.rt)));
    const subs: string[] = [];
    for (const w of workers) {
      const a = await accept(flow.rt, w.token, job.id);
      expect(a.status).toBe(201);
      subs.push(a.json.id);
    }
    const uploads = await Promise.all(
      workers.map(async (w, i) => (i === 3 ? uploadFile(flow.rt, w.token, subs[i]!, await flatPng(), 'image/png', 'flat.png') : uploadFile(flow.rt, w.token, subs[i]!, await detailedJpeg(7100 + i)))),
    );
    expect(uploads.map((u) => u.status)).toEqual([202, 202, 202, 202]);
    expect(await waitForVerdict(flow.rt, workers[3]!.token, subs[3]!)).toMatchObject({ status: 'retry_pending', attempt: 1 });
    const retry = await uploadFile(flow.rt, workers[3]!.token, subs[3]!, await detailedJpeg(7199), 'image/jpeg', 'retry.jpg', 'retry');
    expect(retry.status).toBe(202);
    expect(retry.json).toMatchObject({ status: 'pending_score', attempt: 2 });
    for (const [i, w] of workers.entries()) expect(await waitForVerdict(flow.rt, w.token, subs[i]!)).toMatchObject({ status: 'approved', payout_cents: 8 });
    expect(await get(buyer.live, `/v1/jobs/${job.id}`)).toMatchObject({ status: 'completed', files_approved: 4, files_remaining: 0 });
    expect((await get(buyer.live, `/v1/jobs/${job.id}`)).submission_summary).toMatchObject({ total_submissions: 4, approved: 4 });
    const files = (await get(buyer.live, `/v1/jobs/${job.id}/files?limit=100`)).data as { submission_id: string }[];
    expect(files.map((f) => f.submission_id).sort()).toEqual([...subs].sort());

    // Job 2: two files; one approved, then the buyer cancels; the other worker's reservation ends (its submission `cancelled`).
    const job2 = await createJob(flow.rt, buyer.live, { files_needed: 2, price_per_file_cents: 10 });
    const w5 = await signupWorker(flow.rt);
    const w6 = await signupWorker(flow.rt);
    const a5 = await accept(flow.rt, w5.token, job2.id);
    const a6 = await accept(flow.rt, w6.token, job2.id);
    expect([a5.status, a6.status]).toEqual([201, 201]);
    expect((await uploadFile(flow.rt, w5.token, a5.json.id, await detailedJpeg(7201))).status).toBe(202);
    expect(await waitForVerdict(flow.rt, w5.token, a5.json.id)).toMatchObject({ status: 'approved', payout_cents: 8 });
    expect((await post(buyer.live, `/v1/jobs/${job2.id}/cancel`)).status).toBe(200);
    expect(await get(buyer.live, `/v1/jobs/${job2.id}`)).toMatchObject({ status: 'cancelled', files_approved: 1 });
    await waitFor(async () => (await get(w6.token, `/internal/worker/submissions/${a6.json.id}`)).status === 'cancelled', { timeoutMs: 60_000 });

    // Job 3: one submission of two files, uploaded pre-signed: four stage messages (scoring and
    // annotation of each object) fan in to one verdict, whatever order they come in.
    const job3 = await createJob(flow.rt, buyer.live, { files_needed: 2, files_per_submission: 2, price_per_file_cents: 10 });
    const w7 = await signupWorker(flow.rt);
    const a7 = await accept(flow.rt, w7.token, job3.id);
    expect(a7.status).toBe(201);
    const pics = [await detailedJpeg(7301), await detailedJpeg(7302)];
    const plan = await post(w7.token, `/internal/worker/submissions/${a7.json.id}/upload`, {
      files: pics.map((p, i) => ({ filename: `p${i}.jpg`, content_type: 'image/jpeg', size_bytes: p.length })),
    });
    expect(plan.status).toBe(200);
    const puts = (plan.json.uploads as { url: string; headers: Record<string, string> }[]).map((u, i) => fetch(u.url, { method: 'PUT', body: pics[i], headers: u.headers }));
    expect((await Promise.all(puts)).map((r) => r.status)).toEqual([200, 200]);
    expect(await waitForVerdict(flow.rt, w7.token, a7.json.id)).toMatchObject({ status: 'approved', payout_cents: 16 });
    expect(await get(buyer.live, `/v1/jobs/${job3.id}`)).toMatchObject({ status: 'completed', files_approved: 2 });
    expect((await get(buyer.live, `/v1/jobs/${job3.id}/files`)).data).toHaveLength(2);

    // Money (D31): one deduction per approved submission (its files × the price), one refund of
    // job 2's unused escrow, nothing held, and the ledger's identities.
    const txs = await transactions(buyer.live);
    const deductions = txs.filter((t) => t.type === 'deduction');
    expect(deductions.map((d) => [d.amount_cents, d.submission_id]).sort()).toEqual([...[...subs, a5.json.id].map((s) => [-10, s]), [-20, a7.json.id]].sort());
    expect(txs.filter((t) => t.type === 'escrow').map((t) => [t.amount_cents, t.job_id]).sort()).toEqual([[-40, job.id], [-20, job2.id], [-20, job3.id]].sort());
    expect(txs.filter((t) => t.type === 'refund').map((t) => [t.amount_cents, t.job_id])).toEqual([[10, job2.id]]);
    const after = await get(buyer.live, '/v1/billing/credits');
    expect(after).toMatchObject({ available_cents: before.available_cents - 70, held_cents: 0, total_cents: before.total_cents - 70 });
    expect(after.available_cents).toBe(sum(txs, 'purchase', 'free_tier', 'bonus', 'expiration', 'escrow', 'refund'));
    expect(after.held_cents).toBe(-sum(txs, 'escrow') - sum(txs, 'refund') + sum(txs, 'deduction') + sum(txs, 'reversal'));
    expect(after.total_cents).toBe(after.available_cents + after.held_cents);

    // An export of job 1, with its four Files.
    const created = await post(buyer.live, `/v1/jobs/${job.id}/exports`, { format: 'jsonl', min_score: 1 });
    expect(created.status).toBe(202);
    const exp = await flow.finishedExport(buyer.live, created.json.id);
    expect(exp).toMatchObject({ status: 'succeeded', file_count: 4 });
    expect((await (await fetch(exp.download_url)).text()).trimEnd().split('\n')).toHaveLength(4);

    // Events: one per change; every one delivered to both endpoints, retries included.
    // The list reads an index, which leaves out an event while its deliveries update it: polled
    // until it shows them all (at 1 s, within the key's rate limit), and until they are all delivered.
    const byType = async (type: string) => (await allEvents(buyer.live)).filter((e) => e.type === type);
    const ofType = (list: Ev[], type: string) => list.filter((e) => e.type === type);
    const listed = await waitFor(
      async () => {
        const list = await allEvents(buyer.live);
        const n = (type: string) => ofType(list, type).length;
        return n('export.completed') >= 1 && n('submission.approved') >= 6 && n('submission.scored') >= 7 && n('job.completed') >= 2 && n('job.cancelled') >= 1 ? list : null;
      },
      { timeoutMs: 60_000, intervalMs: 1000 },
    );
    expect(ofType(listed, 'export.completed')).toHaveLength(1);
    expect(ofType(listed, 'submission.approved')).toHaveLength(6);
    expect(ofType(listed, 'submission.scored')).toHaveLength(7); // the flat picture's retry_pending, then its retry
    expect(ofType(listed, 'job.completed').map((e) => e.data.job_id).sort()).toEqual([job.id, job3.id].sort());
    expect(ofType(listed, 'job.cancelled')).toHaveLength(1);
    const settled = await waitFor(
      async () => {
        const list = await allEvents(buyer.live);
        return list.length >= listed.length && list.every((e) => e.delivery_status === 'delivered') ? list : null;
      },
      { timeoutMs: 90_000, intervalMs: 1000 },
    );
    for (const e of settled) {
      expect(e.deliveries.map((d) => [d.endpoint_id, d.status]).sort()).toEqual(endpoints.map((id) => [id, 'delivered']).sort());
      for (const hook of [hookA, hookB]) {
        const copies = flow.rx.at(hook).filter((r) => r.event.id === e.id);
        expect(copies.length).toBeGreaterThanOrEqual(1);
        expect(new Set(copies.map((c) => c.headers['webhook-id']))).toEqual(new Set([e.id]));
        expect(new Set(copies.map((c) => c.rawBody)).size).toBe(1);
      }
    }
    // B's failed answers were retried until delivered.
    expect(settled.some((e) => e.deliveries.some((d) => d.endpoint_id === endpoints[1] && d.attempts > 1))).toBe(true);
    // No order is promised on arrival, but created_at follows the changes: a job completes at or
    // after each of its approvals, and is cancelled after its one approval.
    const at = (e: Ev) => Date.parse(e.created_at);
    const completed = (await byType('job.completed')).find((e) => e.data.job_id === job.id);
    for (const e of (await byType('submission.approved')).filter((x) => x.data.job_id === job.id)) expect(at(e)).toBeLessThanOrEqual(at(completed!));
    const [cancelled] = await byType('job.cancelled');
    for (const e of (await byType('submission.approved')).filter((x) => x.data.job_id === job2.id)) expect(at(e)).toBeLessThanOrEqual(at(cancelled!));
    expect(completed!.data).toMatchObject({ job_id: job.id, files_approved: 4, files_needed: 4, total_worker_payout_cents: 32 });
    expect(cancelled!.data).toMatchObject({ job_id: job2.id, files_approved: 1, files_needed: 2, refund_cents: 10 });

    // The sandbox (test key): its simulated workers' ticks run through the sandbox queue too.
    const sandbox = await post(buyer.test, '/v1/jobs', {
      type: 'data_collection',
      description: 'Photos of colourful shapes for a sandbox run out of order',
      files_needed: 3,
      accepted_formats: ['image/jpeg'],
      price_per_file_cents: 25,
    });
    expect(sandbox.status).toBe(201);
    const done = await waitFor(
      async () => {
        const j = await get(buyer.test, `/v1/jobs/${sandbox.json.id}`);
        return j.status === 'completed' ? j : null;
      },
      { timeoutMs: 150_000, intervalMs: 1_000 },
    );
    expect(done).toMatchObject({ files_approved: 3, files_remaining: 0, environment: 'test' });
    expect((await get(buyer.test, `/v1/jobs/${sandbox.json.id}/files`)).data).toHaveLength(3);
    expect(await get(buyer.test, '/v1/billing/credits')).toMatchObject({ available_cents: 0, held_cents: 0, total_cents: 0 });
    // The whole walk-through: about 28 s alone on 2 cores, so past 60 s on a host 2.5 times slower.
  }, 150_000);
});
