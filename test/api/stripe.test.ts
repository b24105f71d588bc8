/**
 * The Stripe payment provider (D62) on the local runtime, against a local server speaking Stripe's
 * API (test/support/stripe-wire.ts) and with events signed by the SDK's own test-header helper.
 */
import { randomBytes } from 'node:crypto';
import { readFileSync, writeFileSync } from 'node:fs';
import Stripe from 'stripe';
import { resetSecrets } from '../../shared/secrets';
import { setPaymentProvider, disabledProvider } from '../../shared/billing/provider';
import { stoppableHttpClient, stripeProvider } from '../../shared/payments/stripe';
import { runInvocation } from '../../shared/observability/invocation';
import { ledgerState, listEvents } from '../domain/ledger-fixtures';
import { jobBody, newBuyer, newKey, post, startBillingRuntime, type Buyer } from './billing-support';
import { acquire, fingerprint } from '../../shared/idempotency';
import { startFakeStripe, type FakeStripe } from '../support/stripe-wire';
import { waitFor, type TestRuntime, indexesCaughtUp } from '../support/harness';
import { UpdateCommand } from '@aws-sdk/lib-dynamodb';
import { db, tableName } from '../../shared/db/client';
import { keys } from '../../shared/db/keys';
import { Tx } from '../../shared/db/tx';
import { newId } from '../../shared/ids';
import { systemContext } from '../../shared/context';
import { createCheckoutSession } from '../../shared/billing/checkout';
import { addSession } from '../../shared/billing/checkout-session';
import { getOrganization } from '../../shared/billing/checkout';
import { beforeFirstTransaction } from '../support/transaction-conflicts';
import { runAutoTopUp, topUpSessionId } from '../../shared/billing/auto-top-up';
import { getSession } from '../../shared/billing/checkout-session';
import { RetryLater } from '../../shared/work/stage-message';

const WEBHOOK_SECRET = `whsec_${randomBytes(16).toString('hex')}`;
const sdk = new Stripe('sk_test_signing_only');

let rt: TestRuntime & { stopAll(): Promise<void> };
let stripe: FakeStripe;
let restore: () => void;

beforeAll(async () => {
  rt = await startBillingRuntime();
  stripe = await startFakeStripe();
  // The `stripe` secret, as the stack provides it (locally: the data folder's secrets file).
  const file = process.env.LOCAL_SECRETS_FILE!;
  const values = JSON.parse(readFileSync(file, 'utf8')) as Record<string, string>;
  values.stripe = JSON.stringify({ secret_key: 'sk_test_wire', webhook_secret: WEBHOOK_SECRET });
  writeFileSync(file, JSON.stringify(values));
  resetSecrets();
  restore = setPaymentProvider(stripeProvider({ wire: { host: stripe.host, port: stripe.port, protocol: 'http' } }));
});
afterAll(async () => {
  restore?.();
  await stripe?.close();
  await rt?.stopAll();
});

const principal = (b: Buyer, env: 'live' | 'test' = 'live') => ({ kind: 'api_key' as const, orgId: b.orgId, keyId: 'key_x', env, scopes: [], previousSecret: false });
const credits = async (key: string) => (await rt.request('GET', '/v1/billing/credits', { key })).json.available_cents as number;

type SessionEventType = 'checkout.session.completed' | 'checkout.session.async_payment_succeeded' | 'checkout.session.async_payment_failed';

function completedEvent(cs: { id: string }, opts: { paymentIntent?: string; paymentMethod?: string; type?: SessionEventType; paymentStatus?: 'paid' | 'unpaid' } = {}) {
  const pi = opts.paymentIntent ?? `pi_${randomBytes(8).toString('hex')}`;
  stripe.paymentMethodOf.set(pi, opts.paymentMethod ?? 'pm_card_visa');
  const stripeSession = stripe.requests.filter((r) => r.path === '/v1/checkout/sessions').find((r) => r.form.client_reference_id === cs.id);
  return JSON.stringify({
    id: `evt_${randomBytes(12).toString('hex')}`,
    object: 'event',
    type: opts.type ?? 'checkout.session.completed',
    api_version: '2026-10-28.endive',
    created: Math.floor(Date.now() / 1000),
    livemode: false,
    data: {
      object: {
        id: `cs_test_${randomBytes(8).toString('hex')}`,
        object: 'checkout.session',
        mode: 'payment',
        status: 'complete',
        payment_status: opts.paymentStatus ?? 'paid',
        payment_intent: pi,
        customer: stripeSession?.form.customer ?? null,
        client_reference_id: cs.id,
        metadata: { checkout_session_id: cs.id },
      },
    },
  });
}

const deliver = (payload: string, signature = sdk.webhooks.generateTestHeaderString({ payload, secret: WEBHOOK_SECRET })) =>
  rt.request('POST', '/v1/billing/stripe/webhook', { body: payload, headers: { 'Content-Type': 'application/json', 'Stripe-Signature': signature } });

async function purchase(b: Buyer, amount: number) {
  const r = await post(rt, b.live, '/v1/billing/credits/purchase', { amount_cents: amount });
  expect(r.status).toBe(200);
  return r.json;
}

async function expectIdentities(b: Buyer) {
  const s = await ledgerState(principal(b), []);
  expect(s.available).toBe(s.availableFromRows);
  expect(s.held).toBe(s.heldFromRows);
  expect(s.lotsRemaining).toBe(s.available);
}

test('a purchase opens a Stripe Checkout Session in payment mode that saves the card; checkout_url is Stripe-hosted', async () => {
  const b = await newBuyer(rt);
  stripe.requests.length = 0;
  const cs = await purchase(b, 5_000);
  expect(cs).toMatchObject({ object: 'checkout_session', status: 'open', amount_cents: 5_000, bonus_cents: 500 });
  expect(cs.checkout_url).toMatch(/^https:\/\/checkout\.stripe\.com\/c\/pay\/cs_test_/);
  const [customer, session] = stripe.requests;
  expect(customer).toMatchObject({ method: 'POST', path: '/v1/customers', form: { 'metadata[organization_id]': b.orgId } });
  expect(session).toMatchObject({
    method: 'POST',
    path: '/v1/checkout/sessions',
    idempotencyKey: `checkout-${cs.id}`,
    form: expect.objectContaining({
      mode: 'payment',
      client_reference_id: cs.id,
      'metadata[checkout_session_id]': cs.id,
      'payment_intent_data[setup_future_usage]': 'off_session',
      'line_items[0][price_data][unit_amount]': '5000',
      'line_items[0][price_data][currency]': 'usd',
    }),
  });
  expect(session!.form.customer).toMatch(/^cus_/);
});

test('the organization keeps one Stripe customer across purchases', async () => {
  const b = await newBuyer(rt);
  await purchase(b, 1_000);
  stripe.requests.length = 0;
  await purchase(b, 1_000);
  expect(stripe.requests.map((r) => r.path)).toEqual(['/v1/checkout/sessions']);
});

test('checkout.session.completed, correctly signed, credits the purchase and bonus once and emits credits.purchased', async () => {
  const b = await newBuyer(rt);
  const before = await credits(b.live);
  const cs = await purchase(b, 5_000);
  const r = await deliver(completedEvent(cs));
  expect(r.status).toBe(200);
  expect(await credits(b.live)).toBe(before + 5_500);
  expect((await listEvents(principal(b))).filter((e) => e === 'credits.purchased')).toHaveLength(1);
  await expectIdentities(b);
});

test('a Stripe event with a bad signature is 400 with the error envelope and credits nothing', async () => {
  const b = await newBuyer(rt);
  const before = await credits(b.live);
  const cs = await purchase(b, 5_000);
  const payload = completedEvent(cs);
  const forged = await deliver(payload, sdk.webhooks.generateTestHeaderString({ payload, secret: 'whsec_not_ours' }));
  const unsigned = await rt.request('POST', '/v1/billing/stripe/webhook', { body: payload, headers: { 'Content-Type': 'application/json' } });
  const tampered = await deliver(payload.replace('"paid"', '"paid" '), sdk.webhooks.generateTestHeaderString({ payload, secret: WEBHOOK_SECRET }));
  for (const r of [forged, unsigned, tampered]) {
    expect(r.status).toBe(400);
    expect(r.json.error).toMatchObject({ type: 'invalid_request', request_id: r.headers['x-request-id'] });
  }
  expect(await credits(b.live)).toBe(before);
  expect(await listEvents(principal(b))).not.toContain('credits.purchased');
});

test('the same Stripe event delivered twice (and concurrently) credits once', async () => {
  const b = await newBuyer(rt);
  const before = await credits(b.live);
  const cs = await purchase(b, 2_500);
  const payload = completedEvent(cs);
  const results = await Promise.all([deliver(payload), deliver(payload), deliver(payload)]);
  const later = await deliver(payload);
  expect([...results, later].map((r) => r.status)).toEqual([200, 200, 200, 200]);
  expect(await credits(b.live)).toBe(before + 2_625);
  expect((await listEvents(principal(b))).filter((e) => e === 'credits.purchased')).toHaveLength(1);
  await expectIdentities(b);
});

test('a declined off-session top-up emits credits.auto_top_up_failed and grants nothing', async () => {
  const b = await newBuyer(rt);
  stripe.declining.add('pm_card_declines_later');
  const cs = await purchase(b, 1_000);
  expect((await deliver(completedEvent(cs, { paymentMethod: 'pm_card_declines_later' }))).status).toBe(200); // 1250 available
  await rt.request('PATCH', '/v1/organization/settings', { key: b.live, body: { auto_top_up_enabled: true, auto_top_up_amount_cents: 2_500 } });
  stripe.requests.length = 0;
  const job = await post(rt, b.live, '/v1/jobs', jobBody({ files_needed: 15, price_per_file_cents: 20 })); // 1250 → 950: crosses 1000
  expect(job.status).toBe(201);
  await waitFor(async () => (await listEvents(principal(b))).includes('credits.auto_top_up_failed'));
  expect(await credits(b.live)).toBe(950);
  const charge = stripe.requests.find((r) => r.path === '/v1/payment_intents');
  expect(charge?.form).toMatchObject({ amount: '2500', currency: 'usd', payment_method: 'pm_card_declines_later', off_session: 'true', confirm: 'true' });
  const events = await listEvents(principal(b));
  expect(events.filter((e) => e === 'credits.auto_top_up_failed')).toHaveLength(1);
  expect(events).not.toContain('credits.auto_topped_up');
  const failed = await rt.request('GET', '/v1/webhook_events?type=credits.auto_top_up_failed', { key: b.live });
  expect(failed.json.data[0].data).toEqual({ amount_cents: 2_500, reason: 'insufficient_funds' });
  await expectIdentities(b);
});

test('an accepted off-session top-up charges the saved card of the customer and grants the top-up', async () => {
  const b = await newBuyer(rt);
  const cs = await purchase(b, 1_000);
  await deliver(completedEvent(cs, { paymentMethod: 'pm_card_visa' }));
  await rt.request('PATCH', '/v1/organization/settings', { key: b.live, body: { auto_top_up_enabled: true, auto_top_up_amount_cents: 2_500 } });
  await post(rt, b.live, '/v1/jobs', jobBody({ files_needed: 15, price_per_file_cents: 20 }));
  expect(await waitFor(async () => ((await credits(b.live)) !== 950 ? credits(b.live) : null))).toBe(950 + 2_625);
  expect((await listEvents(principal(b))).filter((e) => e === 'credits.auto_topped_up')).toHaveLength(1);
  await expectIdentities(b);
});

test('a top-up leaves the card on file as it is: a card the buyer saved while it was charging is not replaced by the one it charged', async () => {
  const b = await buyerWithCard();
  const eventId = newId('event');
  // The buyer pays a hosted checkout with a new card while the top-up charges the old one.
  const newCard = beforeFirstTransaction(
    (input) => JSON.stringify(input).includes(topUpSessionId(eventId)) && JSON.stringify(input).includes('has_purchased'),
    () => db().send(new UpdateCommand({ TableName: tableName(), Key: keys.organization(b.orgId), UpdateExpression: 'SET payment_method = :pm', ExpressionAttributeValues: { ':pm': 'pm_card_new' } })),
  );
  try {
    expect(await runAutoTopUp(b.orgId, 'live', eventId)).toBe('paid');
  } finally {
    newCard.remove();
  }
  expect(newCard.fired()).toBe(true);
  expect((await getOrganization(b.orgId))?.payment_method).toBe('pm_card_new');
  await expectIdentities(b);
});

test('a top-up paid by a run that stopped before applying it is applied by the next delivery, without charging again', async () => {
  const b = await newBuyer(rt);
  const cs = await purchase(b, 1_000);
  await deliver(completedEvent(cs, { paymentMethod: 'pm_card_visa' }));
  const before = await credits(b.live);
  // What such a run leaves: the crossing's session, still open, with the payment recorded on it.
  const eventId = newId('event');
  const tx = new Tx();
  addSession(tx, systemContext('auto_top_up').actor, null, { id: topUpSessionId(eventId), orgId: b.orgId, env: 'live', amount: 2_500, kind: 'auto_top_up', provider: 'stripe', checkoutUrl: null });
  await tx.commit();
  await db().send(new UpdateCommand({ TableName: tableName(), Key: keys.checkoutSession(topUpSessionId(eventId)), UpdateExpression: 'SET charged_ref = :r', ExpressionAttributeValues: { ':r': 'pi_paid_then_stopped' } }));
  stripe.requests.length = 0;
  expect(await runAutoTopUp(b.orgId, 'live', eventId)).toBe('paid');
  expect(stripe.requests.filter((r) => r.path === '/v1/payment_intents')).toEqual([]);
  expect(await credits(b.live)).toBe(before + 2_625);
  await expectIdentities(b);
});

test('concurrent deliveries of one declined top-up record the decline once and all finish', async () => {
  const b = await newBuyer(rt);
  stripe.declining.add('pm_card_declines_concurrently');
  const cs = await purchase(b, 1_000);
  await deliver(completedEvent(cs, { paymentMethod: 'pm_card_declines_concurrently' }));
  await rt.request('PATCH', '/v1/organization/settings', { key: b.live, body: { auto_top_up_enabled: true, auto_top_up_amount_cents: 2_500 } });
  const before = await credits(b.live);
  const eventId = newId('event'); // a crossing whose message is delivered three times at once
  const outcomes = await Promise.all([1, 2, 3].map(() => runAutoTopUp(b.orgId, 'live', eventId)));
  // Each finishes: it recorded the decline, found it recorded by a concurrent run (failed), or found
  // the session already declined (null: nothing to do). None throws.
  expect(outcomes.every((o) => o === 'failed' || o === null)).toBe(true);
  expect(outcomes).toContain('failed');
  expect((await listEvents(principal(b))).filter((e) => e === 'credits.auto_top_up_failed')).toHaveLength(1);
  expect(await credits(b.live)).toBe(before);
  await expectIdentities(b);
});

describe('cards only, and payments that settle later', () => {
  const paymentMethodTypes = (form: Record<string, string>) => Object.entries(form).filter(([k]) => k.includes('payment_method_types'));

  test('the Checkout Session accepts cards only (allowed_payment_method_types = [card], whatever the Dashboard enables)', async () => {
    const b = await newBuyer(rt);
    stripe.requests.length = 0;
    const cs = await purchase(b, 1_000);
    const session = stripe.requests.find((r) => r.path === '/v1/checkout/sessions' && r.form.client_reference_id === cs.id);
    expect(paymentMethodTypes(session!.form)).toEqual([['allowed_payment_method_types[0]', 'card']]);
  });

  test('the off-session top-up PaymentIntent accepts cards only', async () => {
    const b = await newBuyer(rt);
    const cs = await purchase(b, 1_000);
    await deliver(completedEvent(cs, { paymentMethod: 'pm_card_visa' }));
    await rt.request('PATCH', '/v1/organization/settings', { key: b.live, body: { auto_top_up_enabled: true, auto_top_up_amount_cents: 2_500 } });
    const eventId = newId('event');
    expect(await runAutoTopUp(b.orgId, 'live', eventId)).toBe('paid');
    const charge = stripe.requests.find((r) => r.path === '/v1/payment_intents' && r.form['metadata[checkout_session_id]'] === topUpSessionId(eventId));
    expect(paymentMethodTypes(charge!.form)).toEqual([['allowed_payment_method_types[0]', 'card']]);
  });

  test('a payment that settles later is credited when it settles: completed unpaid grants nothing, async_payment_succeeded grants purchase and bonus once with one credits.purchased', async () => {
    const b = await newBuyer(rt);
    const before = await credits(b.live);
    const cs = await purchase(b, 5_000);
    const paymentIntent = `pi_${randomBytes(8).toString('hex')}`;
    const pending = await deliver(completedEvent(cs, { paymentIntent, paymentStatus: 'unpaid' }));
    expect(pending.status).toBe(200);
    expect(await credits(b.live)).toBe(before);
    expect(await listEvents(principal(b))).not.toContain('credits.purchased');
    const settled = await deliver(completedEvent(cs, { paymentIntent, type: 'checkout.session.async_payment_succeeded' }));
    expect(settled.status).toBe(200);
    expect(await credits(b.live)).toBe(before + 5_500);
    expect((await listEvents(principal(b))).filter((e) => e === 'credits.purchased')).toHaveLength(1);
    expect(await getSession(cs.id)).toMatchObject({ status: 'paid', payment_method: 'pm_card_visa' });
    await expectIdentities(b);
  });

  test('a redelivered async_payment_succeeded (again and concurrently) grants nothing more', async () => {
    const b = await newBuyer(rt);
    const before = await credits(b.live);
    const cs = await purchase(b, 2_500);
    const paymentIntent = `pi_${randomBytes(8).toString('hex')}`;
    await deliver(completedEvent(cs, { paymentIntent, paymentStatus: 'unpaid' }));
    const settled = completedEvent(cs, { paymentIntent, type: 'checkout.session.async_payment_succeeded' });
    expect((await deliver(settled)).status).toBe(200);
    const again = await Promise.all([deliver(settled), deliver(settled), deliver(settled)]);
    expect(again.map((r) => r.status)).toEqual([200, 200, 200]);
    expect(await credits(b.live)).toBe(before + 2_625);
    expect((await listEvents(principal(b))).filter((e) => e === 'credits.purchased')).toHaveLength(1);
    await expectIdentities(b);
  });

  test('async_payment_failed fails the session and grants nothing', async () => {
    const b = await newBuyer(rt);
    const before = await credits(b.live);
    const cs = await purchase(b, 5_000);
    const paymentIntent = `pi_${randomBytes(8).toString('hex')}`;
    await deliver(completedEvent(cs, { paymentIntent, paymentStatus: 'unpaid' }));
    const failed = await deliver(completedEvent(cs, { paymentIntent, type: 'checkout.session.async_payment_failed', paymentStatus: 'unpaid' }));
    expect(failed.status).toBe(200);
    expect(await getSession(cs.id)).toMatchObject({ status: 'failed', failure_reason: 'async_payment_failed' });
    expect(await credits(b.live)).toBe(before);
    expect(await listEvents(principal(b))).not.toContain('credits.purchased');
    await expectIdentities(b);
  });
});

describe('an off-session top-up the bank has not settled yet (PaymentIntent processing)', () => {
  async function buyerWithProcessingCard() {
    const b = await newBuyer(rt);
    const pm = `pm_card_processing_${randomBytes(4).toString('hex')}`;
    stripe.processing.add(pm);
    const cs = await purchase(b, 1_000);
    await deliver(completedEvent(cs, { paymentMethod: pm }));
    await rt.request('PATCH', '/v1/organization/settings', { key: b.live, body: { auto_top_up_enabled: true, auto_top_up_amount_cents: 2_500 } });
    return b;
  }

  test('is neither granted nor declined: the session stays open with the charge recorded and the message is retried later', async () => {
    const b = await buyerWithProcessingCard();
    const before = await credits(b.live);
    const eventId = newId('event');
    await expect(runAutoTopUp(b.orgId, 'live', eventId)).rejects.toBeInstanceOf(RetryLater);
    expect(await getSession(topUpSessionId(eventId))).toMatchObject({ status: 'open', pending_charge_ref: expect.stringMatching(/^pi_/) });
    expect(await credits(b.live)).toBe(before);
    expect(await listEvents(principal(b))).not.toContain('credits.auto_top_up_failed');
  });

  test('once it succeeds, a later delivery grants the top-up once, without charging again and without credits.auto_top_up_failed', async () => {
    const b = await buyerWithProcessingCard();
    const before = await credits(b.live);
    const eventId = newId('event');
    const id = topUpSessionId(eventId);
    const charges = () => stripe.requests.filter((r) => r.method === 'POST' && r.path === '/v1/payment_intents' && r.form['metadata[checkout_session_id]'] === id);
    await expect(runAutoTopUp(b.orgId, 'live', eventId)).rejects.toBeInstanceOf(RetryLater); // processing
    await expect(runAutoTopUp(b.orgId, 'live', eventId)).rejects.toBeInstanceOf(RetryLater); // still processing
    const ref = (await getSession(id))!.pending_charge_ref as string;
    stripe.intents.get(ref)!.status = 'succeeded'; // the bank settles it
    expect(await runAutoTopUp(b.orgId, 'live', eventId)).toBe('paid');
    expect(await runAutoTopUp(b.orgId, 'live', eventId)).toBeNull(); // redelivered: nothing more
    expect(await credits(b.live)).toBe(before + 2_625);
    expect(charges()).toHaveLength(1);
    const events = await listEvents(principal(b));
    expect(events.filter((e) => e === 'credits.auto_topped_up')).toHaveLength(1);
    expect(events).not.toContain('credits.auto_top_up_failed');
    await expectIdentities(b);
  });

  test('through the top-ups queue: the crossing\'s message comes back until the charge settles, then the top-up is granted once', async () => {
    const base = process.env.PIPELINE_RETRY_BASE_SECONDS;
    process.env.PIPELINE_RETRY_BASE_SECONDS = '1';
    try {
      const b = await buyerWithProcessingCard(); // 1250 available
      expect((await post(rt, b.live, '/v1/jobs', jobBody({ files_needed: 15, price_per_file_cents: 20 }))).status).toBe(201); // → 950: crosses 1000
      await indexesCaughtUp();
      const [crossing] = (await rt.request('GET', '/v1/webhook_events?type=credits.low_balance', { key: b.live })).json.data;
      const ref = await waitFor(async () => (await getSession(topUpSessionId(crossing.id)))?.pending_charge_ref as string | undefined);
      stripe.intents.get(ref)!.status = 'succeeded'; // the bank settles it; the next delivery reads it again
      expect(await waitFor(async () => ((await credits(b.live)) !== 950 ? credits(b.live) : null), { timeoutMs: 20_000 })).toBe(950 + 2_625);
      const events = await listEvents(principal(b));
      expect(events.filter((e) => e === 'credits.auto_topped_up')).toHaveLength(1);
      expect(events).not.toContain('credits.auto_top_up_failed');
      await expectIdentities(b);
    } finally {
      if (base === undefined) delete process.env.PIPELINE_RETRY_BASE_SECONDS;
      else process.env.PIPELINE_RETRY_BASE_SECONDS = base;
    }
  });

  test('a final refusal after processing declines it: credits.auto_top_up_failed with the bank\'s reason, nothing granted', async () => {
    const b = await buyerWithProcessingCard();
    const before = await credits(b.live);
    const eventId = newId('event');
    await expect(runAutoTopUp(b.orgId, 'live', eventId)).rejects.toBeInstanceOf(RetryLater);
    const ref = (await getSession(topUpSessionId(eventId)))!.pending_charge_ref as string;
    Object.assign(stripe.intents.get(ref)!, {
      status: 'requires_payment_method',
      last_payment_error: { type: 'card_error', code: 'card_declined', decline_code: 'insufficient_funds', message: 'Your card has insufficient funds.' },
    });
    expect(await runAutoTopUp(b.orgId, 'live', eventId)).toBe('failed');
    expect(await credits(b.live)).toBe(before);
    await indexesCaughtUp();
    const failed = await rt.request('GET', '/v1/webhook_events?type=credits.auto_top_up_failed', { key: b.live });
    expect(failed.json.data.map((e: { data: unknown }) => e.data)).toEqual([{ amount_cents: 2_500, reason: 'insufficient_funds' }]);
    await expectIdentities(b);
  });
});

/** What a run that opened the crossing's session and stopped leaves: the session, open, `extra` on it. */
async function openedTopUp(b: Buyer, extra: Record<string, unknown> = {}) {
  const eventId = newId('event');
  const tx = new Tx();
  addSession(tx, systemContext('auto_top_up').actor, null, { id: topUpSessionId(eventId), orgId: b.orgId, env: 'live', amount: 2_500, kind: 'auto_top_up', provider: 'stripe', checkoutUrl: null });
  await tx.commit();
  for (const [k, v] of Object.entries(extra)) {
    await db().send(new UpdateCommand({ TableName: tableName(), Key: keys.checkoutSession(topUpSessionId(eventId)), UpdateExpression: 'SET #k = :v', ExpressionAttributeNames: { '#k': k }, ExpressionAttributeValues: { ':v': v } }));
  }
  return eventId;
}

async function buyerWithCard() {
  const b = await newBuyer(rt);
  const cs = await purchase(b, 1_000);
  await deliver(completedEvent(cs, { paymentMethod: 'pm_card_visa' }));
  await rt.request('PATCH', '/v1/organization/settings', { key: b.live, body: { auto_top_up_enabled: true, auto_top_up_amount_cents: 2_500 } });
  return b;
}

describe('a top-up charge whose answer was lost, delivered again a day later (past Stripe\'s 24-hour idempotency keys)', () => {
  const dayAgo = () => new Date(Date.now() - 25 * 60 * 60 * 1000).toISOString();

  test('the charge is found at Stripe by the session it was made for and applied once: no second PaymentIntent', async () => {
    const b = await buyerWithCard();
    const before = await credits(b.live);
    const eventId = await openedTopUp(b, { charge_payment_method: 'pm_card_visa', charge_started_at: dayAgo() });
    // What Stripe kept of the first run's charge, whose answer never reached us.
    stripe.intents.set('pi_lost_answer', { status: 'succeeded', payment_method: 'pm_card_visa', amount: 2_500, last_payment_error: null, metadata: { checkout_session_id: topUpSessionId(eventId) } });
    stripe.requests.length = 0;
    expect(await runAutoTopUp(b.orgId, 'live', eventId)).toBe('paid');
    expect(stripe.requests.filter((r) => r.method === 'POST' && r.path === '/v1/payment_intents')).toEqual([]);
    expect(stripe.requests.filter((r) => r.path === '/v1/payment_intents/search')).toHaveLength(1);
    expect(await credits(b.live)).toBe(before + 2_625);
    expect((await getSession(topUpSessionId(eventId)))?.payment_ref).toBe('pi_lost_answer');
    await expectIdentities(b);
  });

  test('when Stripe has no charge for the session, it is charged then, once', async () => {
    const b = await buyerWithCard();
    const before = await credits(b.live);
    const eventId = await openedTopUp(b, { charge_payment_method: 'pm_card_visa', charge_started_at: dayAgo() });
    stripe.requests.length = 0;
    expect(await runAutoTopUp(b.orgId, 'live', eventId)).toBe('paid');
    expect(stripe.requests.filter((r) => r.method === 'POST' && r.path === '/v1/payment_intents')).toHaveLength(1);
    expect(await credits(b.live)).toBe(before + 2_625);
    await expectIdentities(b);
  });

  test('within the day the idempotency key answers for the first charge: Stripe is not searched', async () => {
    const b = await buyerWithCard();
    const eventId = await openedTopUp(b, { charge_payment_method: 'pm_card_visa', charge_started_at: new Date().toISOString() });
    stripe.requests.length = 0;
    expect(await runAutoTopUp(b.orgId, 'live', eventId)).toBe('paid');
    expect(stripe.requests.map((r) => r.path)).toEqual(['/v1/payment_intents']);
  });
});

describe('auto top-up turned off after the crossing', () => {
  test('a session opened before auto top-up was turned off is cancelled when delivered again: no PaymentIntent reaches Stripe, nothing granted', async () => {
    const b = await buyerWithCard();
    const before = await credits(b.live);
    const eventId = await openedTopUp(b);
    await rt.request('PATCH', '/v1/organization/settings', { key: b.live, body: { auto_top_up_enabled: false } });
    stripe.requests.length = 0;
    expect(await runAutoTopUp(b.orgId, 'live', eventId)).toBeNull();
    expect(stripe.requests.filter((r) => r.path.startsWith('/v1/payment_intents'))).toEqual([]);
    expect(await getSession(topUpSessionId(eventId))).toMatchObject({ status: 'cancelled', cancel_reason: 'disabled' });
    expect(await credits(b.live)).toBe(before);
    const events = await listEvents(principal(b));
    expect(events).not.toContain('credits.auto_topped_up');
    expect(events).not.toContain('credits.auto_top_up_failed');
  });

  test('turned off after the run read the settings and before it started the charge: no PaymentIntent reaches Stripe, the session is cancelled', async () => {
    const b = await buyerWithCard();
    const before = await credits(b.live);
    const eventId = newId('event');
    // The buyer turns auto top-up off just as the run opens its session (after its read of the settings).
    const off = beforeFirstTransaction(
      (input) => JSON.stringify(input).includes(topUpSessionId(eventId)),
      async () => expect((await rt.request('PATCH', '/v1/organization/settings', { key: b.live, body: { auto_top_up_enabled: false } })).status).toBe(200),
    );
    stripe.requests.length = 0;
    try {
      expect(await runAutoTopUp(b.orgId, 'live', eventId)).toBeNull();
    } finally {
      off.remove();
    }
    expect(off.fired()).toBe(true);
    expect(stripe.requests.filter((r) => r.path.startsWith('/v1/payment_intents'))).toEqual([]);
    expect(await getSession(topUpSessionId(eventId))).toMatchObject({ status: 'cancelled', cancel_reason: 'disabled' });
    expect(await credits(b.live)).toBe(before);
  });

  test('a charge already started before auto top-up was turned off is finished (same card, same idempotency key) and applied once', async () => {
    const b = await buyerWithCard();
    const before = await credits(b.live);
    const eventId = await openedTopUp(b, { charge_payment_method: 'pm_card_visa', charge_started_at: new Date().toISOString() });
    await rt.request('PATCH', '/v1/organization/settings', { key: b.live, body: { auto_top_up_enabled: false } });
    stripe.requests.length = 0;
    expect(await runAutoTopUp(b.orgId, 'live', eventId)).toBe('paid');
    const charges = stripe.requests.filter((r) => r.path === '/v1/payment_intents');
    expect(charges.map((r) => [r.idempotencyKey, r.form.payment_method])).toEqual([[`top-up-${topUpSessionId(eventId)}`, 'pm_card_visa']]);
    expect(await credits(b.live)).toBe(before + 2_625);
    await expectIdentities(b);
  });
});

test('a test key purchase is test mode: completed at once, test balance only, Stripe never asked', async () => {
  const b = await newBuyer(rt);
  const live = await credits(b.live);
  stripe.requests.length = 0;
  const r = await post(rt, b.test, '/v1/billing/credits/purchase', { amount_cents: 1_000 });
  expect(r.status).toBe(200);
  expect(r.json).toMatchObject({ object: 'checkout_session', status: 'paid', checkout_url: null, total_credits_cents: 1_000 });
  expect(await credits(b.test)).toBe(1_000);
  expect(await credits(b.live)).toBe(live);
  expect(stripe.requests).toEqual([]);
});

test('D11: a test-mode purchase records its response in the confirmation\'s transaction, so a retry after a crash replays it and credits once', async () => {
  const b = await newBuyer(rt);
  const idem = newKey();
  const body = { amount_cents: 1_000 };
  const path = '/v1/billing/credits/purchase';
  // The request's first run: the key taken, the domain function run, then the function dies before
  // its middleware could store anything.
  const acquired = await acquire({ scope: `${b.orgId}#test`, key: idem, fingerprint: fingerprint('POST', path, JSON.stringify(body)), requestId: 'req_crash', successStatus: 200 });
  if (acquired.kind !== 'acquired') throw new Error(`expected a fresh key, got ${acquired.kind}`);
  const principal = { kind: 'api_key' as const, orgId: b.orgId, keyId: 'key_crash', env: 'test' as const, scopes: ['billing:write'], previousSecret: false };
  const first = await createCheckoutSession({ actor: { type: 'api_key', id: 'key_crash' }, requestId: 'req_crash', idem: acquired.handle }, principal, 1_000);
  expect(acquired.handle.recorded).toBe(true);
  // The client's retry with the same key replays the first session; nothing is credited again.
  const retry = await post(rt, b.test, path, body, idem);
  expect([retry.status, retry.json.id, retry.json.status]).toEqual([200, first.id, 'paid']);
  expect(await credits(b.test)).toBe(1_000);
});

describe('a deployment without payments (PAYMENTS_PROVIDER=disabled)', () => {
  let undo: () => void;
  beforeAll(() => {
    undo = setPaymentProvider(disabledProvider);
  });
  afterAll(() => undo());

  test('a live purchase is refused with 503 service_unavailable and no checkout link', async () => {
    const b = await newBuyer(rt, { verified: false });
    const r = await post(rt, b.live, '/v1/billing/credits/purchase', { amount_cents: 1_000 });
    expect(r.status).toBe(503);
    expect(r.json.error).toMatchObject({ type: 'service_unavailable', details: [{ code: 'payments_disabled' }] });
    expect(r.text).not.toContain('checkout_url');
  });

  test('test keys still buy test credits', async () => {
    const b = await newBuyer(rt, { verified: false });
    const r = await post(rt, b.test, '/v1/billing/credits/purchase', { amount_cents: 1_000 });
    expect([r.status, r.json.status]).toEqual([200, 'paid']);
  });

  test('the Stripe webhook route answers 404 when Stripe is not the provider', async () => {
    const r = await rt.request('POST', '/v1/billing/stripe/webhook', { body: '{}', headers: { 'Stripe-Signature': 't=1,v1=00' } });
    expect(r.status).toBe(404);
  });
});

describe('a local invocation stopped at its time-out sends nothing more to Stripe, as Lambda would have ended it', () => {
  it('a provider call in a stopped invocation fails before any request', async () => {
    const provider = stripeProvider({ wire: { host: stripe.host, port: stripe.port, protocol: 'http' } });
    const before = stripe.requests.length;
    await expect(runInvocation({ fn: 'TopUps', stopped: true }, () => provider.chargeStatus('pi_stopped'))).rejects.toMatchObject({ name: 'InvocationStopped' });
    expect(stripe.requests.length).toBe(before);
  });

  it('the provider’s one synchronous method stays synchronous (only the methods that call Stripe are wrapped)', () => {
    expect(() => stripeProvider().paymentMethodFor('org_x')).toThrow(/learns the payment method from the completed checkout/);
  });

  it('a stop that comes while a method runs surfaces as the stop, not as a connection failure, and nothing is sent', async () => {
    const provider = stripeProvider({ wire: { host: stripe.host, port: stripe.port, protocol: 'http' } });
    const before = stripe.requests.length;
    const invocation = { fn: 'TopUps', stopped: false };
    const call = runInvocation(invocation, () => provider.chargeStatus('pi_mid'));
    invocation.stopped = true; // the method has started (past its first check) and awaits the keys
    await expect(call).rejects.toMatchObject({ name: 'InvocationStopped' });
    expect(stripe.requests.length).toBe(before);
  });

  it('each request is checked, not only a method’s first: Stripe’s HTTP client refuses to send once stopped', async () => {
    const http = stoppableHttpClient(Stripe);
    const send = () => http.makeRequest(stripe.host, String(stripe.port), '/v1/payment_intents/pi_x', 'GET', {}, '', 'http', 5_000);
    await expect(runInvocation({ fn: 'TopUps', stopped: true }, send)).rejects.toMatchObject({ name: 'InvocationStopped' });
    const before = stripe.requests.length;
    await runInvocation({ fn: 'TopUps', stopped: false }, send);
    expect(stripe.requests.length).toBe(before + 1);
  });
});

