/** Billing routes over HTTP (spec "Billing", D31-D34) on the local runtime. */
import { confirmCheckout } from '../../shared/billing';
import { beforeFirstTransaction } from '../support/transaction-conflicts';
import { idTime } from '../../shared/ids';
import { createJob } from '../../shared/jobs';
import { systemContext } from '../../shared/context';
import { listEvents } from '../domain/ledger-fixtures';
import { buyCredits, jobBody, newBuyer, post, startBillingRuntime, type Buyer } from './billing-support';
import { waitFor, type TestRuntime, indexesCaughtUp } from '../support/harness';
import { runAutoTopUp, topUpRequestOf } from '../../shared/billing/auto-top-up';

/** One delivery of a `top-ups` message, as its consumer runs it. */
const runTopUp = async (body: string) => {
  const r = await topUpRequestOf(body);
  return runAutoTopUp(r.orgId, r.env, r.eventId);
};

let rt: TestRuntime & { stopAll(): Promise<void> };
beforeAll(async () => {
  rt = await startBillingRuntime();
});
afterAll(() => rt?.stopAll());

const principal = (b: Buyer) => ({ kind: 'api_key' as const, orgId: b.orgId, keyId: 'key_test', env: 'live' as const, scopes: [], previousSecret: false });

test('GET /v1/billing/credits: available, held, total, currency and updated_at (spec fields)', async () => {
  const b = await newBuyer(rt);
  const r = await rt.request('GET', '/v1/billing/credits', { key: b.live });
  expect(r.json).toMatchObject({ object: 'credit_balance', available_cents: 250, held_cents: 0, total_cents: 250, balance_cents: 250, currency: 'usd' });
  expect(r.json.updated_at).toMatch(/Z$/);
  expect(r.headers['x-service-credits-remaining']).toBe('250');
});

test('D59: a brand-new balance shows updated_at = the creation time, never null (test environment, never moved)', async () => {
  const b = await newBuyer(rt, { verified: false });
  const r = await rt.request('GET', '/v1/billing/credits', { key: b.test });
  expect(r.json).toMatchObject({ available_cents: 0, held_cents: 0 });
  expect(r.json.updated_at).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
});

test('D32: purchase returns a checkout session with the bonus of the highest pack at or below the amount', async () => {
  const b = await newBuyer(rt, { verified: false });
  const r = await post(rt, b.live, '/v1/billing/credits/purchase', { amount_cents: 7_499 });
  expect(r.status).toBe(200);
  expect(r.json).toMatchObject({ object: 'checkout_session', status: 'open', amount_cents: 7_499, bonus_cents: 749, total_credits_cents: 8_248 });
  expect(r.json.id).toMatch(/^cs_/);
  expect(r.json.checkout_url).toBe(`${rt.url}/checkout/${r.json.id}`);
});

test('D32: the alias path /v1/billing/purchase works the same', async () => {
  const b = await newBuyer(rt, { verified: false });
  const r = await post(rt, b.live, '/v1/billing/purchase', { amount_cents: 25_000 });
  expect([r.status, r.json.bonus_cents, r.json.total_credits_cents]).toEqual([200, 5_000, 30_000]);
});

test.each([[999], [100_001], [1500.5]])('D32: amount_cents %s is rejected with 400 naming the field', async (amount) => {
  const b = await newBuyer(rt, { verified: false });
  const r = await post(rt, b.live, '/v1/billing/credits/purchase', { amount_cents: amount });
  expect([r.status, r.json.error.details[0].field]).toEqual([400, 'amount_cents']);
});

test('D32: paying applies the purchase and bonus rows once, even when confirmed twice concurrently, and emits credits.purchased once', async () => {
  const b = await newBuyer(rt, { verified: false });
  const cs = (await post(rt, b.live, '/v1/billing/credits/purchase', { amount_cents: 5_000 })).json;
  const outcomes = await Promise.all([1, 2, 3].map(() => confirmCheckout(cs.id, { paymentMethod: 'pm_x', providerRef: cs.id })));
  expect(outcomes.map((o) => o.outcome).sort()).toEqual(['already_paid', 'already_paid', 'paid']);
  const rows = (await rt.request('GET', '/v1/billing/transactions', { key: b.live })).json.data;
  expect(rows.map((t: { type: string; amount_cents: number }) => [t.type, t.amount_cents]).sort()).toEqual([['bonus', 500], ['purchase', 5_000]]);
  expect(rows.find((t: { type: string }) => t.type === 'bonus').expires_at).toMatch(/Z$/);
  expect((await listEvents(principal(b))).filter((e) => e === 'credits.purchased')).toHaveLength(1);
  expect((await rt.request('GET', '/v1/billing/credits', { key: b.live })).json.available_cents).toBe(5_500);
});

test('D31: transactions filter by type, newest first, with job_id on job rows', async () => {
  const b = await newBuyer(rt, { purchaseCents: 1000 });
  const job = (await post(rt, b.live, '/v1/jobs', jobBody({ files_needed: 3 }))).json;
  await indexesCaughtUp();
  const escrow = await rt.request('GET', '/v1/billing/transactions?type=escrow', { key: b.live });
  expect(escrow.json.data).toEqual([expect.objectContaining({ object: 'credit_transaction', type: 'escrow', amount_cents: -60, job_id: job.id })]);
  const all = await rt.request('GET', '/v1/billing/transactions?limit=2', { key: b.live });
  expect(all.json.data.map((t: { type: string }) => t.type)).toEqual(['escrow', 'purchase']);
  expect(all.json.has_more).toBe(true);
  expect((await rt.request('GET', '/v1/billing/transactions?type=gift', { key: b.live })).status).toBe(400);
});

test('D34: a drop below the threshold emits credits.low_balance once per crossing', async () => {
  const b = await newBuyer(rt, { purchaseCents: 1000 }); // 1250 available, threshold 1000 by default
  await post(rt, b.live, '/v1/jobs', jobBody({ files_needed: 10, price_per_file_cents: 20 })); // 1050: above
  await post(rt, b.live, '/v1/jobs', jobBody({ files_needed: 5, price_per_file_cents: 20 })); // 950: crosses
  await post(rt, b.live, '/v1/jobs', jobBody({ files_needed: 5, price_per_file_cents: 20 })); // 850: still below
  expect((await listEvents(principal(b))).filter((e) => e === 'credits.low_balance')).toHaveLength(1);
});

test('a creation that commits on its second try has the id of that try: its created_at is the time its id carries (D1), so created_after and the list order agree', async () => {
  const b = await newBuyer(rt, { purchaseCents: 1000 });
  expect((await rt.request('PATCH', '/v1/organization/settings', { key: b.live, body: { auto_top_up_threshold_cents: 550 } })).status).toBe(200);
  expect((await post(rt, b.live, '/v1/jobs', jobBody({ files_needed: 25, price_per_file_cents: 10 }))).status).toBe(201);
  const refunded = await post(rt, b.live, '/v1/jobs', jobBody({ files_needed: 1, price_per_file_cents: 20 }));
  // A refund just before the crossing creation commits: the balance it read is stale, it tries again.
  const refund = beforeFirstTransaction(
    (input) => JSON.stringify(input).includes('Escrow for job'),
    async () => expect((await post(rt, b.live, `/v1/jobs/${refunded.json.id}/cancel`, {})).status).toBe(200),
  );
  let made;
  try {
    made = await post(rt, b.live, '/v1/jobs', jobBody({ files_needed: 48, price_per_file_cents: 10 }));
  } finally {
    refund.remove();
  }
  expect(refund.fired()).toBe(true);
  expect(made.status).toBe(201);
  expect(idTime(made.json.id).toISOString()).toBe(made.json.created_at);
  const after = new Date(Date.parse(made.json.created_at) - 1).toISOString();
  await indexesCaughtUp();
  const listed = await rt.request('GET', `/v1/jobs?created_after=${after}`, { key: b.live });
  expect(listed.json.data.map((j: { id: string }) => j.id)).toContain(made.json.id);
});

test("D34: the crossing's credits.low_balance carries the balance after it, though a refund changed the balance in between", async () => {
  const b = await newBuyer(rt, { purchaseCents: 1000 }); // 1250: 250 free-tier credits (drawn first), 1000 purchased
  expect((await rt.request('PATCH', '/v1/organization/settings', { key: b.live, body: { auto_top_up_threshold_cents: 550 } })).status).toBe(200);
  expect((await post(rt, b.live, '/v1/jobs', jobBody({ files_needed: 25, price_per_file_cents: 10 }))).status).toBe(201); // 1000
  const refunded = await post(rt, b.live, '/v1/jobs', jobBody({ files_needed: 1, price_per_file_cents: 20 })); // 980
  // Just before the crossing creation (980 → 500 as read) commits, the other job is cancelled and
  // its 20 go back (980 → 1000): the crossing leaves 520, not 500.
  const refund = beforeFirstTransaction(
    (input) => JSON.stringify(input).includes('Escrow for job'),
    async () => expect((await post(rt, b.live, `/v1/jobs/${refunded.json.id}/cancel`, {})).status).toBe(200),
  );
  try {
    expect((await post(rt, b.live, '/v1/jobs', jobBody({ files_needed: 48, price_per_file_cents: 10 }))).status).toBe(201);
  } finally {
    refund.remove();
  }
  expect(refund.fired()).toBe(true);
  const credits = await rt.request('GET', '/v1/billing/credits', { key: b.live });
  expect(credits.json.available_cents).toBe(520);
  await indexesCaughtUp();
  const events = await rt.request('GET', '/v1/webhook_events?type=credits.low_balance', { key: b.live }).then((r) => r.json.data);
  expect(events.map((e: { data: { balance_cents: number } }) => e.data.balance_cents)).toEqual([520]);
});

test('D34: with auto top-up enabled and a payment method on file, the crossing buys the top-up amount', async () => {
  const b = await newBuyer(rt, { purchaseCents: 1000 }); // the hosted checkout leaves a payment method
  const s = await rt.request('PATCH', '/v1/organization/settings', { key: b.live, body: { auto_top_up_enabled: true, auto_top_up_amount_cents: 2_500 } });
  expect(s.status).toBe(200);
  await post(rt, b.live, '/v1/jobs', jobBody({ files_needed: 15, price_per_file_cents: 20 })); // 1250 → 950
  // Queued by the crossing's commit, applied by the top-ups consumer moments later.
  const available = () => rt.request('GET', '/v1/billing/credits', { key: b.live }).then((r) => r.json.available_cents as number);
  expect(await waitFor(async () => ((await available()) !== 950 ? available() : null))).toBe(950 + 2_625);
  const events = await listEvents(principal(b));
  expect(events.filter((e) => e === 'credits.auto_topped_up')).toHaveLength(1);
});

test('D34: the top-up of one crossing is bought once, however often and however concurrently its message is delivered', async () => {
  const b = await newBuyer(rt, { purchaseCents: 1000 });
  await rt.request('PATCH', '/v1/organization/settings', { key: b.live, body: { auto_top_up_enabled: true, auto_top_up_amount_cents: 2_500 } });
  await post(rt, b.live, '/v1/jobs', jobBody({ files_needed: 15, price_per_file_cents: 20 })); // 1250 → 950: crosses
  await indexesCaughtUp();
  const [event] = await rt.request('GET', '/v1/webhook_events?type=credits.low_balance', { key: b.live }).then((r) => r.json.data);
  const redelivered = JSON.stringify({ kind: 'auto_top_up', event_id: event.id });
  await Promise.all([runTopUp(redelivered), runTopUp(redelivered), runTopUp(redelivered)]);
  await waitFor(async () => (await listEvents(principal(b))).includes('credits.auto_topped_up'));
  await runTopUp(redelivered);
  expect((await rt.request('GET', '/v1/billing/credits', { key: b.live })).json.available_cents).toBe(950 + 2_625);
  expect((await listEvents(principal(b))).filter((e) => e === 'credits.auto_topped_up')).toHaveLength(1);
  expect((await rt.request('GET', '/v1/billing/transactions?type=purchase', { key: b.live })).json.data).toHaveLength(2); // the first purchase and one top-up
});

test('D52: settings bounds are validated', async () => {
  const b = await newBuyer(rt, { verified: false });
  const r = await rt.request('PATCH', '/v1/organization/settings', { key: b.live, body: { auto_top_up_amount_cents: 999 } });
  expect([r.status, r.json.error.details[0].field]).toEqual([400, 'auto_top_up_amount_cents']);
});

test('D13/D52: the first completed purchase lifts the free tier (second job allowed)', async () => {
  const b = await newBuyer(rt);
  await createJob(systemContext(), principal(b), { ...jobBody({ files_needed: 2 }), type: 'data_collection' } as never);
  await buyCredits(rt, b.live, 1000);
  expect((await post(rt, b.live, '/v1/jobs', jobBody({ files_needed: 2 }))).status).toBe(201);
});

test('D3/D32: a test key\'s purchase completes at once, locally as deployed: paid, no checkout_url, nothing to pay on a page', async () => {
  const b = await newBuyer(rt, { verified: false });
  const cs = await rt.request('POST', '/v1/billing/credits/purchase', { key: b.test, headers: { 'Idempotency-Key': `t-${Date.now()}` }, body: { amount_cents: 2000 } });
  expect(cs.status).toBe(200);
  expect(cs.json).toMatchObject({ status: 'paid', checkout_url: null, amount_cents: 2000 });
  expect((await rt.request('GET', '/v1/billing/credits', { key: b.test })).json.available_cents).toBe(2000 + cs.json.bonus_cents);
});

test('D3: purchases with a test key credit only the test balance', async () => {
  const b = await newBuyer(rt, { verified: false });
  await buyCredits(rt, b.test, 1000);
  expect((await rt.request('GET', '/v1/billing/credits', { key: b.test })).json.available_cents).toBe(1000);
  expect((await rt.request('GET', '/v1/billing/credits', { key: b.live })).json.available_cents).toBe(0);
});
