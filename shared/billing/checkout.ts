/**
 * Credit purchases (D32, D62) and auto top-up (D34).
 *
 * Who pays where depends on the provider (provider.ts): the local page, Stripe Checkout, or
 * nobody (`disabled`: live purchases answer 503). A test-environment purchase never reaches a
 * processor (D3: test balances are never charged): with Stripe or payments disabled it is
 * confirmed at once and answered `status: 'paid'`, `checkout_url: null` (locally the local page,
 * which moves no money either, serves both environments).
 *
 * The session item is in checkout-session.ts; its confirmation (exactly once) in
 * confirm-checkout.ts.
 */
import { GetCommand } from '@aws-sdk/lib-dynamodb';
import { db, tableName } from '../db/client';
import { keys } from '../db/keys';
import { Tx } from '../db/tx';
import { newId } from '../ids';
import { errors } from '../errors';
import { recordResponse, type MutationContext } from '../context';
import { paymentProvider, PaymentsUnavailable } from './provider';
import { addSession, bonusFor, presentSession } from './checkout-session';
import { confirmCheckout } from './confirm-checkout';
import type { BuyerPrincipal } from '../types';

export const PURCHASE_MIN_CENTS = 1000;
export const PURCHASE_MAX_CENTS = 100_000;

type Item = Record<string, unknown>;

export async function getOrganization(orgId: string): Promise<Item | undefined> {
  const out = await db().send(new GetCommand({ TableName: tableName(), Key: keys.organization(orgId), ConsistentRead: true }));
  return out.Item;
}

const refuseUnavailable = () =>
  errors.unavailable(
    'Buying credits is not available on this deployment: no payment processor is configured. Test keys can still buy test credits.',
    'payments_disabled',
  );

/** POST /v1/billing/credits/purchase (and its alias): a checkout session, 200 (D32, D43, D62). */
export async function createCheckoutSession(ctx: MutationContext, p: BuyerPrincipal, amount: number) {
  const provider = paymentProvider();
  // Test keys never reach a processor, whichever is configured (the local page included): the same
  // answer locally as deployed (D3, D32).
  if (p.env === 'test') return testModePurchase(ctx, p, amount);
  if (provider.name === 'disabled') throw refuseUnavailable();
  const id = newId('checkoutSession');
  const org = await getOrganization(p.orgId);
  if (!org) throw errors.notFound('organization', p.orgId);
  let started;
  try {
    started = await provider.startCheckout({
      sessionId: id,
      orgId: p.orgId,
      orgName: org.name as string,
      orgEmail: org.email as string,
      customerRef: (org.stripe_customer_id as string | undefined) ?? null,
      amountCents: amount,
      totalCreditsCents: amount + bonusFor(amount),
    });
  } catch (e) {
    if (e instanceof PaymentsUnavailable) throw refuseUnavailable();
    throw e;
  }
  const tx = new Tx();
  const item = addSession(tx, ctx.actor, ctx.requestId, {
    id,
    orgId: p.orgId,
    env: p.env,
    amount,
    kind: 'checkout',
    provider: provider.name,
    checkoutUrl: started.checkoutUrl,
    providerRef: started.providerRef,
  });
  if (started.customerRef && started.customerRef !== org.stripe_customer_id) {
    tx.update('organization', keys.organization(p.orgId), 'SET stripe_customer_id = if_not_exists(stripe_customer_id, :c)', {
      condition: 'attribute_exists(PK)',
      values: { ':c': started.customerRef },
    });
  }
  const view = presentSession(item);
  recordResponse(ctx, tx, view);
  await tx.commit();
  return view;
}

/**
 * A test key's purchase with a real processor configured (or none): no processor is asked and
 * nothing is charged; the session is confirmed at once and credits the test balance only. The
 * response is recorded under the Idempotency-Key in the confirmation's transaction (D11): a retry
 * after a crash or an ambiguous commit replays it instead of crediting a second session.
 */
async function testModePurchase(ctx: MutationContext, p: BuyerPrincipal, amount: number) {
  const tx = new Tx();
  const item = addSession(tx, ctx.actor, ctx.requestId, { orgId: p.orgId, env: p.env, amount, kind: 'checkout', provider: 'test_mode', checkoutUrl: null });
  await tx.commit();
  const r = await confirmCheckout(item.id, { paymentMethod: null, providerRef: `test_mode_${item.id}` }, (confirm, paid) => recordResponse(ctx, confirm, presentSession(paid)));
  return presentSession(r.session ?? item);
}
