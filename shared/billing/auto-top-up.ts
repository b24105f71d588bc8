/**
 * Auto top-up (D34, D62): an off-session charge of the card on file when the available balance
 * crosses the organization's threshold.
 */
import { Tx } from '../db/tx';
import { keys } from '../db/keys';
import { nowIso } from '../clock';
import { emit } from '../outbox';
import { audit } from '../audit';
import { logger } from '../logger';
import { systemContext } from '../context';
import { addSession, confirmCheckout, getOrganization, type ConfirmOutcome } from './checkout';
import { paymentProvider } from './provider';
import type { Env } from '../types';

type Item = Record<string, unknown>;

/**
 * D34 auto top-up, run after the transaction that crossed the low-balance threshold committed:
 * charge the payment method on file (left by the first hosted checkout) off-session through the
 * provider, then apply it like any purchase, plus `credits.auto_topped_up`. A decline (or a
 * deployment without payments) grants nothing and emits `credits.auto_top_up_failed {amount_cents,
 * reason}`. No payment method on file: nothing happens. The test environment is never charged: its
 * top-up is confirmed at once without asking the processor.
 */
export async function runAutoTopUp(orgId: string, env: Env, amount: number): Promise<ConfirmOutcome | null> {
  const org = await getOrganization(orgId);
  const pm = org?.payment_method as string | undefined;
  if (!pm) return null;
  const provider = paymentProvider();
  const testMode = env === 'test';
  const tx = new Tx();
  const session = addSession(tx, systemContext('auto_top_up').actor, null, {
    orgId,
    env,
    amount,
    kind: 'auto_top_up',
    provider: testMode ? 'test_mode' : provider.name,
    checkoutUrl: null,
  });
  await tx.commit();
  const charge = testMode
    ? ({ ok: true, providerRef: `test_mode_${session.id}` } as const)
    : await provider.chargeSaved({ customerRef: (org?.stripe_customer_id as string | undefined) ?? null, paymentMethod: pm, amountCents: amount, reference: session.id });
  let outcome: ConfirmOutcome;
  if (charge.ok) outcome = (await confirmCheckout(session.id, { paymentMethod: pm, providerRef: charge.providerRef, alreadyCharged: true })).outcome;
  else outcome = await failTopUp(session, charge.reason, charge.providerRef);
  logger.info('auto top-up', { org_id: orgId, amount_cents: amount, outcome, ...(charge.ok ? {} : { reason: charge.reason }) });
  return outcome;
}

/** A declined top-up: the session fails, nothing is granted, the organization hears why. */
async function failTopUp(session: Item, reason: string, providerRef: string | null): Promise<ConfirmOutcome> {
  const orgId = session.org_id as string;
  const env = session.environment as Env;
  const amount = Number(session.amount_cents);
  const tx = new Tx();
  tx.update('checkout_session', keys.checkoutSession(session.id as string), 'SET #s = :failed, failure_reason = :r, payment_ref = :ref, failed_at = :t', {
    condition: '#s = :open',
    names: { '#s': 'status' },
    values: { ':failed': 'failed', ':open': 'open', ':r': reason, ':ref': providerRef, ':t': nowIso() },
  });
  emit(tx, { orgId, env, type: 'credits.auto_top_up_failed', data: { amount_cents: amount, reason } });
  audit(tx, {
    orgId,
    eventType: 'credits.auto_top_up_failed',
    actor: { type: 'system', id: `payment_provider:${session.provider as string}` },
    env,
    resource: { type: 'checkout_session', id: session.id as string },
    requestId: null,
    data: { amount_cents: amount, reason, provider_ref: providerRef },
  });
  await tx.commit();
  return 'failed';
}
