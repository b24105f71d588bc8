/**
 * SQS delivers at least once: a message can reach two receivers at the same moment. Here every
 * queue batch of the whole stack (scoring, annotation, webhooks, exports, cancellations,
 * withdrawals, top-ups, the sandbox) is handed to two consumer invocations at once (the runtime's
 * `duplicateDeliveries`), and a buyer's whole flow must come out as if each message had been
 * delivered once (D54, D31): one verdict, one File and one charge per file, one payout each, one
 * event per state change, each delivered to the endpoint (copies of a delivery identical), one
 * export with every File.
 */
import { waitFor, indexesCaughtUp } from '../support/harness';
import { flowSuite } from './support';

jest.setTimeout(240_000);

describe('every queue message delivered twice at once changes nothing', () => {
  const flow = flowSuite({ duplicateDeliveries: true });
  const post = flow.post;

  it('a job filled by two workers: one verdict, File, charge and payout per submission; one event per change, each delivered; one export of both Files', async () => {
    const { buyer, hook, before, job, subs } = await flow.twoApprovals([900, 901]);
    await indexesCaughtUp(); // the lists below read indexes

    // Money: two deductions of the price, the escrow spent, nothing held.
    const deductions = (await flow.rt.request('GET', '/v1/billing/transactions?type=deduction&limit=100', { key: buyer.live })).json.data;
    expect(deductions.map((d: { amount_cents: number; submission_id: string }) => [d.amount_cents, d.submission_id]).sort()).toEqual(subs.map((s) => [-10, s]).sort());
    const after = (await flow.rt.request('GET', '/v1/billing/credits', { key: buyer.live })).json;
    expect(after).toMatchObject({ available_cents: before.available_cents - 20, held_cents: 0 });
    expect((await flow.rt.request('GET', `/v1/jobs/${job.id}`, { key: buyer.live })).json).toMatchObject({ status: 'completed', files_approved: 2 });
    expect((await flow.rt.request('GET', `/v1/jobs/${job.id}/files?min_score=1`, { key: buyer.live })).json.data).toHaveLength(2);

    // Events: one per change, each delivered. Webhooks are at least once too (D37): two copies of
    // an attempt message may both send; the receiver then gets the same webhook-id and the same
    // signed bytes, which it deduplicates on, and the delivery counts one attempt.
    // The event list reads an index, and the deliveries keep updating the events: wait until all are listed.
    const events = async (type: string) => (await flow.rt.request('GET', `/v1/webhook_events?type=${type}&limit=100`, { key: buyer.live })).json.data as { id: string }[];
    const listed = await waitFor(async () => {
      const [approved, completed] = [await events('submission.approved'), await events('job.completed')];
      return approved.length >= 2 && completed.length >= 1 ? { approved, completed } : null;
    }, { intervalMs: 1500 }); // within the key's rate limit (D13)
    expect(listed.approved).toHaveLength(2);
    expect(listed.completed).toHaveLength(1);
    const all = await waitFor(async () => {
      const l = (await flow.rt.request('GET', '/v1/webhook_events?limit=100', { key: buyer.live })).json.data as { id: string; type: string }[];
      return [...listed.approved, ...listed.completed].every((e) => l.some((x) => x.id === e.id)) ? l : null;
    }, { intervalMs: 1500 });
    await waitFor(async () => all.every((e) => flow.rx.at(hook).some((r) => r.event.id === e.id)), { timeoutMs: 60_000 });
    // The copies did reach the consumers: the webhooks queue's dispatcher sent some events twice.
    expect(flow.rx.at(hook).length).toBeGreaterThan(all.length);
    for (const e of all) {
      const copies = flow.rx.at(hook).filter((r) => r.event.id === e.id);
      expect(new Set(copies.map((c) => c.headers['webhook-id']))).toEqual(new Set([e.id]));
      expect(new Set(copies.map((c) => c.rawBody)).size).toBe(1);
    }
    await waitFor(async () => {
      const listed = (await flow.rt.request('GET', '/v1/webhook_events?limit=100', { key: buyer.live })).json.data as { delivery_status: string; attempts?: number }[];
      return listed.every((e) => e.delivery_status === 'delivered');
    });

    // One export, with both Files.
    const created = await post(buyer.live, `/v1/jobs/${job.id}/exports`, { format: 'jsonl', min_score: 1 });
    expect(created.status).toBe(202);
    const exp = await flow.finishedExport(buyer.live, created.json.id);
    expect(exp).toMatchObject({ status: 'succeeded', file_count: 2 });
    const lines = (await (await fetch(exp.download_url)).text()).trimEnd().split('\n');
    expect(lines).toHaveLength(2);
  });
});
