/**
 * The Stripe payment provider (D62), on the official `stripe` SDK.
 *
 * - Purchase: a Checkout Session in `payment` mode for the organization's Stripe customer (created
 *   once, kept on the organization), with consent to save the card for later off-session charges
 *   (`setup_future_usage: off_session`). `checkout_url` is Stripe's hosted page. Cards only
 *   (`allowed_payment_method_types: ['card']`, whatever the Dashboard enables): the product is
 *   prepaid credits, granted when the payment succeeds, and a bank debit (ACH, SEPA) would only
 *   settle days later.
 * - Confirmation: Stripe's `checkout.session.completed` event with `payment_status: 'paid'` at
 *   `POST /v1/billing/stripe/webhook`, verified with the `Stripe-Signature` header and the
 *   endpoint's signing secret. A payment that completes later (`completed` with `unpaid`, then
 *   `checkout.session.async_payment_succeeded`) is confirmed by the later event through the same
 *   path; `checkout.session.async_payment_failed` fails the session. So a Dashboard setting never
 *   leaves a payment uncredited.
 * - Auto top-up: an off-session PaymentIntent on the saved card (cards only), confirmed at once; a
 *   decline is reported, never thrown; one still `processing` is reported pending, and
 *   `chargeStatus` reads it again later.
 *
 * Keys come from the `stripe` secret (JSON `{"secret_key":"sk_…","webhook_secret":"whsec_…"}`).
 * `wire` points the SDK at another host (tests run it against a local server speaking Stripe's API).
 *
 * The SDK is loaded with the first call (`import('stripe')`), in the functions that pay: the
 * purchase and Stripe webhook routes, and the top-ups consumer, which buys the auto top-up a
 * crossing of the low-balance threshold queues (job creation never talks to Stripe).
 */
import type Stripe from 'stripe';
import { getSecret } from '../secrets';
import type { ChargeResult, PaymentProvider } from '../billing/provider';
import { ensureRunning } from '../observability/invocation';

export interface StripeKeys {
  secret_key: string;
  webhook_secret: string;
}

export interface StripeWire {
  host: string;
  port: number;
  protocol: 'http' | 'https';
}

export type StripeWebhookOutcome =
  | { kind: 'checkout_completed'; eventId: string; sessionId: string; paymentMethod: string | null; customerRef: string | null; providerRef: string }
  | { kind: 'checkout_failed'; eventId: string; sessionId: string; providerRef: string; reason: string }
  | { kind: 'ignored'; eventId: string; type: string; why: string };

export interface StripeProvider extends PaymentProvider {
  /** Verify and read a webhook delivery; throws StripeSignatureError when the signature is wrong. */
  readWebhook(rawBody: string, signature: string | undefined): Promise<StripeWebhookOutcome>;
}

export class StripeSignatureError extends Error {
  override name = 'StripeSignatureError';
}

/**
 * Cards only (D34, D62): credits are granted when the payment succeeds, and an off-session top-up
 * must settle at once. `allowed_payment_method_types` is the parameter of the pinned API version
 * (the SDK's, 2026-10-28.endive); `payment_method_types` was removed from Checkout Session and
 * PaymentIntent creation in 2026-09-30.endive and is refused there with a 400.
 */
const CARDS_ONLY = { allowed_payment_method_types: ['card'] as ['card'] };

/** A PaymentIntent's state as a charge result: settled, refused for good, or still processing. */
function intentResult(pi: Stripe.PaymentIntent): ChargeResult {
  switch (pi.status) {
    case 'succeeded':
      return { ok: true, providerRef: pi.id };
    case 'processing':
      // Accepted but not settled yet: no money to grant, no decline to report (asked again later).
      return { ok: false, pending: true, providerRef: pi.id };
    case 'requires_action':
      // The bank wants the buyer (3-D Secure), who is not present off-session: final here.
      return { ok: false, reason: 'authentication_required', providerRef: pi.id };
    default: {
      // requires_payment_method (declined), canceled, …: nothing arrived, nothing is granted.
      // (requires_capture cannot happen: capture is automatic.)
      const e = pi.last_payment_error;
      return { ok: false, reason: e?.decline_code ?? e?.code ?? pi.status, providerRef: pi.id };
    }
  }
}

export async function stripeKeys(): Promise<StripeKeys> {
  const k = JSON.parse(await getSecret('stripe')) as Partial<StripeKeys>;
  if (!k.secret_key || !k.webhook_secret) throw new Error('the stripe secret must be JSON {"secret_key","webhook_secret"}');
  return k as StripeKeys;
}

/**
 * Stripe's own Node HTTP client, which sends nothing once the local invocation it runs in was
 * stopped at its time-out (shared/observability/invocation.ts): Lambda would have ended it. Each
 * request is checked, not only a method's first, since one method may make several.
 */
export function stoppableHttpClient(sdk: typeof Stripe): Stripe.HttpClient {
  const http = sdk.createNodeHttpClient();
  const send = http.makeRequest.bind(http);
  http.makeRequest = (...args: Parameters<typeof send>) => {
    try {
      ensureRunning();
    } catch (e) {
      return Promise.reject(e);
    }
    return send(...args);
  };
  return http;
}

/**
 * A request refused because the local invocation was stopped is retried by Stripe as a connection
 * failure and surfaces as a `StripeConnectionError` with the stop as its `detail`: the caller gets
 * the stop itself, as from any other call of a stopped invocation.
 */
function stopsSurface(provider: StripeProvider): StripeProvider {
  const surfaced = <A extends unknown[], R>(call: (...args: A) => Promise<R>) =>
    async (...args: A): Promise<R> => {
      try {
        return await call(...args);
      } catch (e) {
        const detail = (e as { detail?: { name?: string } }).detail;
        throw detail?.name === 'InvocationStopped' ? detail : e;
      }
    };
  // Only the methods that call Stripe; `paymentMethodFor` stays synchronous, as the interface says.
  return {
    ...provider,
    startCheckout: surfaced(provider.startCheckout.bind(provider)),
    chargeSaved: surfaced(provider.chargeSaved.bind(provider)),
    chargeStatus: surfaced(provider.chargeStatus.bind(provider)),
    findCharge: surfaced(provider.findCharge.bind(provider)),
    readWebhook: surfaced(provider.readWebhook.bind(provider)),
  };
}

export function stripeProvider(opts: { wire?: StripeWire } = {}): StripeProvider {
  let cached: { key: string; client: Stripe } | null = null;
  let sdk: typeof Stripe | null = null;

  async function client(): Promise<{ stripe: Stripe; keys: StripeKeys; sdk: typeof Stripe }> {
    ensureRunning();
    const keys = await stripeKeys();
    sdk ??= (await import('stripe')).default;
    if (cached?.key !== keys.secret_key) {
      cached = {
        key: keys.secret_key,
        client: new sdk(keys.secret_key, { maxNetworkRetries: 2, timeout: 15_000, httpClient: stoppableHttpClient(sdk), ...(opts.wire ?? {}) }),
      };
    }
    return { stripe: cached.client, keys, sdk };
  }

  const metadata = (sessionId: string, orgId: string) => ({ checkout_session_id: sessionId, organization_id: orgId });

  const provider: StripeProvider = {
    name: 'stripe',
    async startCheckout(r) {
      const { stripe } = await client();
      let customer = r.customerRef;
      if (!customer) {
        // One customer per organization; the idempotency key makes a retried creation return the same one.
        const c = await stripe.customers.create(
          { name: r.orgName, email: r.orgEmail, metadata: { organization_id: r.orgId } },
          { idempotencyKey: `customer-${r.orgId}` },
        );
        customer = c.id;
      }
      const success = process.env.CHECKOUT_SUCCESS_URL;
      const cancel = process.env.CHECKOUT_CANCEL_URL;
      const session = await stripe.checkout.sessions.create(
        {
          mode: 'payment',
          ...CARDS_ONLY,
          customer,
          client_reference_id: r.sessionId,
          line_items: [
            {
              quantity: 1,
              price_data: {
                currency: 'usd',
                unit_amount: r.amountCents,
                product_data: { name: `Credits: $${(r.totalCreditsCents / 100).toFixed(2)} (including bonus)` },
              },
            },
          ],
          // Consent to keep the card for auto top-up, charged off-session later (D34, D62).
          payment_intent_data: { setup_future_usage: 'off_session', metadata: metadata(r.sessionId, r.orgId) },
          metadata: metadata(r.sessionId, r.orgId),
          ...(success ? { success_url: success } : {}),
          ...(cancel ? { cancel_url: cancel } : {}),
        },
        { idempotencyKey: `checkout-${r.sessionId}` },
      );
      if (!session.url) throw new Error(`Stripe returned checkout session ${session.id} without a url`);
      return { checkoutUrl: session.url, providerRef: session.id, customerRef: customer };
    },
    paymentMethodFor() {
      throw new Error('the Stripe provider learns the payment method from the completed checkout');
    },
    async chargeSaved({ customerRef, paymentMethod, amountCents, reference }): Promise<ChargeResult> {
      const { stripe, sdk: StripeSdk } = await client();
      if (!customerRef) return { ok: false, reason: 'no_customer', providerRef: null };
      try {
        const pi = await stripe.paymentIntents.create(
          {
            amount: amountCents,
            currency: 'usd',
            ...CARDS_ONLY,
            customer: customerRef,
            payment_method: paymentMethod,
            off_session: true,
            confirm: true,
            description: 'Credits auto top-up',
            metadata: { checkout_session_id: reference },
          },
          { idempotencyKey: `top-up-${reference}` },
        );
        return intentResult(pi);
      } catch (e) {
        if (e instanceof StripeSdk.errors.StripeCardError) {
          const raw = e.raw as { decline_code?: string; payment_intent?: { id?: string } } | undefined;
          return { ok: false, reason: e.decline_code ?? raw?.decline_code ?? e.code ?? 'card_declined', providerRef: raw?.payment_intent?.id ?? null };
        }
        throw e;
      }
    },
    async chargeStatus(providerRef) {
      const { stripe } = await client();
      return intentResult(await stripe.paymentIntents.retrieve(providerRef));
    },
    async findCharge(reference) {
      // Search is eventually consistent (about a minute); it is asked only a day after the charge.
      const { stripe } = await client();
      const found = await stripe.paymentIntents.search({ query: `metadata['checkout_session_id']:'${reference.replace(/['\\]/g, '')}'`, limit: 10 });
      const pis = found.data;
      const best = pis.find((pi) => pi.status === 'succeeded') ?? pis.find((pi) => pi.status === 'processing') ?? pis[0];
      return best ? intentResult(best) : null;
    },
    async readWebhook(rawBody, signature) {
      const { stripe, keys } = await client();
      let event: Stripe.Event;
      try {
        event = stripe.webhooks.constructEvent(rawBody, signature ?? '', keys.webhook_secret);
      } catch (e) {
        throw new StripeSignatureError((e as Error).message);
      }
      if (event.type !== 'checkout.session.completed' && event.type !== 'checkout.session.async_payment_succeeded' && event.type !== 'checkout.session.async_payment_failed') {
        return { kind: 'ignored', eventId: event.id, type: event.type, why: 'not handled' };
      }
      const s = event.data.object;
      const sessionId = s.metadata?.checkout_session_id ?? s.client_reference_id;
      if (s.mode !== 'payment' || !sessionId) return { kind: 'ignored', eventId: event.id, type: event.type, why: 'not a credit purchase' };
      const piId = typeof s.payment_intent === 'string' ? s.payment_intent : (s.payment_intent?.id ?? null);
      if (event.type === 'checkout.session.async_payment_failed') {
        return { kind: 'checkout_failed', eventId: event.id, sessionId, providerRef: piId ?? s.id, reason: 'async_payment_failed' };
      }
      // `completed` with `unpaid`: a payment method that settles later; its own event follows
      // (async_payment_succeeded or async_payment_failed). Only a paid session is applied.
      if (s.payment_status !== 'paid') return { kind: 'ignored', eventId: event.id, type: event.type, why: `payment_status ${s.payment_status}` };
      let paymentMethod: string | null = null;
      if (piId) {
        const pi = await stripe.paymentIntents.retrieve(piId);
        paymentMethod = typeof pi.payment_method === 'string' ? pi.payment_method : (pi.payment_method?.id ?? null);
      }
      const customerRef = typeof s.customer === 'string' ? s.customer : (s.customer?.id ?? null);
      return { kind: 'checkout_completed', eventId: event.id, sessionId, paymentMethod, customerRef, providerRef: piId ?? s.id };
    },
  };
  return stopsSurface(provider);
}
