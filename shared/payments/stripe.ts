/**
 * The Stripe payment provider (D62), on the official `stripe` SDK.
 *
 * - Purchase: a Checkout Session in `payment` mode for the organization's Stripe customer (created
 *   once, kept on the organization), with consent to save the card for later off-session charges
 *   (`setup_future_usage: off_session`). `checkout_url` is Stripe's hosted page.
 * - Confirmation: Stripe's `checkout.session.completed` event at `POST /v1/billing/stripe/webhook`,
 *   verified with the `Stripe-Signature` header and the endpoint's signing secret.
 * - Auto top-up: an off-session PaymentIntent on the saved card, confirmed at once; a decline is
 *   reported, never thrown.
 *
 * Keys come from the `stripe` secret (JSON `{"secret_key":"sk_…","webhook_secret":"whsec_…"}`).
 * `wire` points the SDK at another host (tests run it against a local server speaking Stripe's API).
 *
 * The SDK is loaded with the first call (`import('stripe')`): the purchase and Stripe webhook routes
 * bundle it; job creation, which needs it only for an auto top-up, has it installed beside its
 * bundle instead (the route's `native.packages`), so its cold start does not carry it.
 */
import type Stripe from 'stripe';
import { getSecret } from '../secrets';
import type { ChargeResult, PaymentProvider } from '../billing/provider';

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
  | { kind: 'ignored'; eventId: string; type: string; why: string };

export interface StripeProvider extends PaymentProvider {
  /** Verify and read a webhook delivery; throws StripeSignatureError when the signature is wrong. */
  readWebhook(rawBody: string, signature: string | undefined): Promise<StripeWebhookOutcome>;
}

export class StripeSignatureError extends Error {
  override name = 'StripeSignatureError';
}

export async function stripeKeys(): Promise<StripeKeys> {
  const k = JSON.parse(await getSecret('stripe')) as Partial<StripeKeys>;
  if (!k.secret_key || !k.webhook_secret) throw new Error('the stripe secret must be JSON {"secret_key","webhook_secret"}');
  return k as StripeKeys;
}

export function stripeProvider(opts: { wire?: StripeWire } = {}): StripeProvider {
  let cached: { key: string; client: Stripe } | null = null;
  let sdk: typeof Stripe | null = null;

  async function client(): Promise<{ stripe: Stripe; keys: StripeKeys; sdk: typeof Stripe }> {
    const keys = await stripeKeys();
    sdk ??= (await import('stripe')).default;
    if (cached?.key !== keys.secret_key) {
      cached = {
        key: keys.secret_key,
        client: new sdk(keys.secret_key, { maxNetworkRetries: 2, timeout: 15_000, ...(opts.wire ?? {}) }),
      };
    }
    return { stripe: cached.client, keys, sdk };
  }

  const metadata = (sessionId: string, orgId: string) => ({ checkout_session_id: sessionId, organization_id: orgId });

  return {
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
            customer: customerRef,
            payment_method: paymentMethod,
            off_session: true,
            confirm: true,
            description: 'Credits auto top-up',
            metadata: { checkout_session_id: reference },
          },
          { idempotencyKey: `top-up-${reference}` },
        );
        if (pi.status === 'succeeded') return { ok: true, providerRef: pi.id };
        // requires_action (authentication), processing, …: no money arrived, nothing is granted.
        return { ok: false, reason: pi.status === 'requires_action' ? 'authentication_required' : pi.status, providerRef: pi.id };
      } catch (e) {
        if (e instanceof StripeSdk.errors.StripeCardError) {
          const raw = e.raw as { decline_code?: string; payment_intent?: { id?: string } } | undefined;
          return { ok: false, reason: e.decline_code ?? raw?.decline_code ?? e.code ?? 'card_declined', providerRef: raw?.payment_intent?.id ?? null };
        }
        throw e;
      }
    },
    async readWebhook(rawBody, signature) {
      const { stripe, keys } = await client();
      let event: Stripe.Event;
      try {
        event = stripe.webhooks.constructEvent(rawBody, signature ?? '', keys.webhook_secret);
      } catch (e) {
        throw new StripeSignatureError((e as Error).message);
      }
      if (event.type !== 'checkout.session.completed') return { kind: 'ignored', eventId: event.id, type: event.type, why: 'not handled' };
      const s = event.data.object;
      const sessionId = s.metadata?.checkout_session_id ?? s.client_reference_id;
      if (s.mode !== 'payment' || !sessionId) return { kind: 'ignored', eventId: event.id, type: event.type, why: 'not a credit purchase' };
      if (s.payment_status !== 'paid') return { kind: 'ignored', eventId: event.id, type: event.type, why: `payment_status ${s.payment_status}` };
      const piId = typeof s.payment_intent === 'string' ? s.payment_intent : (s.payment_intent?.id ?? null);
      let paymentMethod: string | null = null;
      if (piId) {
        const pi = await stripe.paymentIntents.retrieve(piId);
        paymentMethod = typeof pi.payment_method === 'string' ? pi.payment_method : (pi.payment_method?.id ?? null);
      }
      const customerRef = typeof s.customer === 'string' ? s.customer : (s.customer?.id ?? null);
      return { kind: 'checkout_completed', eventId: event.id, sessionId, paymentMethod, customerRef, providerRef: piId ?? s.id };
    },
  };
}
