/**
 * The payment-processor boundary (D32). Everything the service needs from a processor sits behind
 * this interface; the `local` provider is real code (the hosted page is served by the local
 * runtime, see shared/payments/local-checkout-page.ts) and is the only one wired today. A card
 * processor (e.g. Stripe Checkout + off-session PaymentIntents) would implement the same two calls.
 */
import { createHash } from 'node:crypto';
import { config } from '../config';

export interface PaymentProvider {
  readonly name: string;
  /** Where the buyer pays a checkout session (the hosted page). */
  checkoutUrl(sessionId: string): string;
  /** The payment method a completed hosted checkout leaves on file for the organization (D34). */
  paymentMethodFor(orgId: string): string;
  /** Charge a saved payment method off-session (auto top-up, D34). Throws when declined. */
  chargeSaved(input: { paymentMethod: string; amountCents: number; reference: string }): Promise<{ providerRef: string }>;
}

export const localProvider: PaymentProvider = {
  name: 'local',
  checkoutUrl: (id) => `${config().publicBaseUrl}/checkout/${id}`,
  paymentMethodFor: (orgId) => `pm_local_${createHash('sha256').update(orgId).digest('hex').slice(0, 16)}`,
  chargeSaved: async ({ reference }) => ({ providerRef: `local_charge_${reference}` }),
};

let current: PaymentProvider = localProvider;

export function paymentProvider(): PaymentProvider {
  return current;
}

/** Tests: swap the provider (e.g. a declining one); returns a restore function. */
export function setPaymentProvider(p: PaymentProvider): () => void {
  const prev = current;
  current = p;
  return () => {
    current = prev;
  };
}
