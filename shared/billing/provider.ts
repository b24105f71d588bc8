/**
 * The payment-processor boundary (D32, D62). Three providers, chosen by `PAYMENTS_PROVIDER`:
 *
 * - `local` (the embedded runtime's default): the hosted page served by the local runtime
 *   (shared/payments/local-checkout-page.ts). It moves no money; a "saved card" is the local test
 *   card the page leaves on file, and an off-session charge of it succeeds.
 * - `stripe` (deployed): Stripe Checkout for purchases, off-session PaymentIntents for auto
 *   top-up, confirmation by Stripe's signed webhook (shared/payments/stripe.ts).
 * - `disabled` (deployed without Stripe): live purchases are refused with 503 and auto top-ups
 *   fail with `credits.auto_top_up_failed`; no checkout link is ever handed out.
 *
 * Test-environment purchases never reach a processor (D3, D62): see checkout.ts.
 */
import { stripeProvider } from '../payments/stripe';
import { createHash } from 'node:crypto';
import { config } from '../config';

export interface CheckoutRequest {
  sessionId: string;
  orgId: string;
  orgName: string;
  orgEmail: string;
  /** A processor customer already on file for the organization, if any. */
  customerRef: string | null;
  amountCents: number;
  totalCreditsCents: number;
}

/**
 * What became of an off-session charge: accepted (`ok`), refused for good (`reason`), or `pending`:
 * accepted by the processor but not settled yet (a PaymentIntent `processing`), neither money to
 * grant nor a decline; ask again later with `chargeStatus`.
 */
export type ChargeResult =
  | { ok: true; providerRef: string }
  | { ok: false; pending?: false; reason: string; providerRef: string | null }
  | { ok: false; pending: true; providerRef: string };

export interface PaymentProvider {
  readonly name: 'local' | 'stripe' | 'disabled';
  /** Open a hosted checkout for a session: where the buyer pays, and the processor's references. */
  startCheckout(r: CheckoutRequest): Promise<{ checkoutUrl: string; providerRef: string | null; customerRef: string | null }>;
  /** The payment method a hosted checkout of the local provider leaves on file (D34). */
  paymentMethodFor(orgId: string): string;
  /** Charge a saved payment method off-session (auto top-up, D34). A decline is a result, not a throw. */
  chargeSaved(input: { customerRef: string | null; paymentMethod: string; amountCents: number; reference: string }): Promise<ChargeResult>;
  /** The present state of a charge `chargeSaved` answered `pending` (its `providerRef`). */
  chargeStatus(providerRef: string): Promise<ChargeResult>;
  /**
   * The charge `chargeSaved` made for `reference`, if the processor has one, else null: asked
   * before charging again once the processor's idempotency key may have expired, so a charge whose
   * answer was lost is found rather than made twice.
   */
  findCharge(reference: string): Promise<ChargeResult | null>;
}

export class PaymentsUnavailable extends Error {
  override name = 'PaymentsUnavailable';
}

export const localProvider: PaymentProvider = {
  name: 'local',
  startCheckout: async ({ sessionId }) => ({ checkoutUrl: `${config().publicBaseUrl}/checkout/${sessionId}`, providerRef: null, customerRef: null }),
  paymentMethodFor: (orgId) => `pm_local_${createHash('sha256').update(orgId).digest('hex').slice(0, 16)}`,
  // The local test card on file: the local provider moves no money, like a processor's sandbox.
  chargeSaved: async ({ reference }) => ({ ok: true, providerRef: `local_charge_${reference}` }),
  chargeStatus: async (providerRef) => ({ ok: true, providerRef }),
  // It keeps no charges: charging the same reference again answers the same result and moves nothing.
  findCharge: async () => null,
};

export const disabledProvider: PaymentProvider = {
  name: 'disabled',
  startCheckout: async () => {
    throw new PaymentsUnavailable('payments are not configured on this deployment');
  },
  paymentMethodFor: () => {
    throw new PaymentsUnavailable('payments are not configured on this deployment');
  },
  chargeSaved: async () => ({ ok: false, reason: 'payments_unavailable', providerRef: null }),
  chargeStatus: async (providerRef) => ({ ok: false, reason: 'payments_unavailable', providerRef }),
  findCharge: async () => null,
};

let override: PaymentProvider | null = null;
let fromEnv: { key: string; provider: PaymentProvider } | null = null;

/** The provider of this deployment: `PAYMENTS_PROVIDER`, default `local` locally, `disabled` deployed. */
export function paymentProvider(): PaymentProvider {
  if (override) return override;
  const key = process.env.PAYMENTS_PROVIDER ?? (config().runtime === 'local' ? 'local' : 'disabled');
  if (fromEnv?.key === key) return fromEnv.provider;
  let provider: PaymentProvider;
  if (key === 'local') provider = localProvider;
  else if (key === 'disabled') provider = disabledProvider;
  else if (key === 'stripe') {
    // The adapter is imported statically; it loads the Stripe SDK itself on its first call.
    provider = stripeProvider();
  } else throw new Error(`PAYMENTS_PROVIDER must be local, stripe or disabled, not ${key}`);
  fromEnv = { key, provider };
  return provider;
}

/** Tests: use another provider (e.g. Stripe against a local wire server); returns a restore function. */
export function setPaymentProvider(p: PaymentProvider): () => void {
  const prev = override;
  override = p;
  return () => {
    override = prev;
  };
}
