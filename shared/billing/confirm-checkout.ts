/**
 * Applying what the payment provider reports of a checkout session (D32, D62): paid
 * (`confirmCheckout`) or failed (`failCheckout`), each exactly once.
 *
 * A checkout session (`CS#<cs_id>`) is created `open`; the payment provider confirms it and
 * `confirmCheckout` applies it exactly once: the session moves open → paid under a condition in the
 * same transaction as the `purchase` and `bonus` rows, their lots, the balance, the organization's
 * `has_purchased` flag (D13/D52 standard tier) and saved payment method, `credits.purchased` and
 * the audit record. A second confirmation (double click, replayed POST, provider retry) finds the
 * session paid and changes nothing. A provider's event id is recorded in the same transaction,
 * so a redelivered event is recognised even before the session is looked at.
 */
import { GetCommand } from '@aws-sdk/lib-dynamodb';
import { db, tableName } from '../db/client';
import { keys } from '../db/keys';
import { Tx } from '../db/tx';
import { now, nowIso } from '../clock';
import { emit } from '../outbox';
import { audit } from '../audit';
import { ConditionFailed } from '../errors';
import { grantCreditsMany, twelveMonthsAfter } from '../ledger/lots';
import { readBalanceItem, versionCondition } from '../ledger/balance';
import { purchaseMarkOnTestBalance } from '../orgs/rate-tier';
import { getSession } from './checkout-session';
import type { Env } from '../types';

type Item = Record<string, unknown>;

export type ConfirmOutcome = 'paid' | 'already_paid' | 'expired' | 'not_found' | 'failed';

export interface Payment {
  /** The payment method now on file for the organization (live); null in test mode. */
  paymentMethod: string | null;
  providerRef: string;
  /**
   * The processor's event id (e.g. Stripe's `evt_…`): recorded in the same transaction, so a
   * redelivery of the same event applies nothing twice.
   */
  eventId?: string;
  /**
   * The money already moved at the processor (webhook, off-session charge): the session's own
   * expiry no longer matters. The local page enforces it (paying there is the payment).
   */
  alreadyCharged?: boolean;
}

const paymentEventKey = (eventId: string) => ({ PK: `PAYEVT#${eventId}`, SK: 'PAYEVT' });

/** Whether a processor event was already applied. */
export async function paymentEventSeen(eventId: string): Promise<boolean> {
  const out = await db().send(new GetCommand({ TableName: tableName(), Key: paymentEventKey(eventId), ConsistentRead: true }));
  return Boolean(out.Item);
}

/**
 * A payment the processor reports failed after the checkout (a delayed method that did not settle,
 * Stripe's `checkout.session.async_payment_failed`): the open session fails, nothing is granted,
 * and the processor's event id is recorded in the same transaction. Safe to call any number of
 * times; a paid session is left alone.
 */
export async function failCheckout(csId: string, f: { providerRef: string; reason: string; eventId: string }): Promise<{ outcome: ConfirmOutcome }> {
  const s = await getSession(csId);
  if (!s) return { outcome: 'not_found' };
  if (s.status === 'paid') return { outcome: 'already_paid' };
  if (s.status !== 'open') return { outcome: 'failed' };
  const at = nowIso();
  const tx = new Tx();
  tx.update('checkout_session', keys.checkoutSession(csId), 'SET #s = :failed, failure_reason = :r, payment_ref = :ref, failed_at = :t', {
    condition: '#s = :open',
    names: { '#s': 'status' },
    values: { ':failed': 'failed', ':open': 'open', ':r': f.reason, ':ref': f.providerRef, ':t': at },
  });
  tx.create('payment_event', {
    ...paymentEventKey(f.eventId),
    entity: 'payment_event',
    event_id: f.eventId,
    checkout_session_id: csId,
    applied_at: at,
    ttl: Math.floor(Date.parse(at) / 1000) + 90 * 86_400,
  });
  audit(tx, {
    orgId: s.org_id as string,
    eventType: 'credits.purchase_failed',
    actor: { type: 'system', id: `payment_provider:${s.provider as string}` },
    env: s.environment as Env,
    resource: { type: 'checkout_session', id: csId },
    requestId: null,
    data: { amount_cents: Number(s.amount_cents), reason: f.reason, provider_ref: f.providerRef },
  });
  try {
    await tx.commit();
    return { outcome: 'failed' };
  } catch (e) {
    if (!(e instanceof ConditionFailed)) throw e;
    // The same event applied by a concurrent delivery, or the session settled meanwhile.
    const now = await getSession(csId);
    return { outcome: now?.status === 'paid' ? 'already_paid' : 'failed' };
  }
}

/**
 * Apply a paid session exactly once: its ledger rows, events and audit record in one transaction.
 * Safe to call any number of times, concurrently. `alsoInTx` adds to that transaction (the
 * caller's idempotent response), given the paid session.
 */
export async function confirmCheckout(csId: string, payment: Payment, alsoInTx?: (tx: Tx, paid: Item) => void): Promise<{ outcome: ConfirmOutcome; session?: Item }> {
  for (let attempt = 0; attempt < 12; attempt++) {
    const s = await getSession(csId);
    if (!s) return { outcome: 'not_found' };
    if (s.status === 'paid') return { outcome: 'already_paid', session: s };
    if (s.status !== 'open') return { outcome: 'failed', session: s };
    if (!payment.alreadyCharged && new Date(s.expires_at as string).getTime() <= now().getTime()) return { outcome: 'expired', session: s };
    const orgId = s.org_id as string;
    const env = s.environment as Env;
    const amount = Number(s.amount_cents);
    const bonus = Number(s.bonus_cents);
    const at = now();
    const bal = await readBalanceItem(orgId, env);
    const before = Number(bal?.available_cents ?? 0);
    const tx = new Tx();
    tx.update('checkout_session', keys.checkoutSession(csId), 'SET #s = :paid, paid_at = :t, payment_method = :pm, payment_ref = :ref', {
      condition: payment.alreadyCharged ? '#s = :open' : '#s = :open AND expires_at > :t',
      names: { '#s': 'status' },
      values: { ':paid': 'paid', ':open': 'open', ':t': at.toISOString(), ':pm': payment.paymentMethod, ':ref': payment.providerRef },
    });
    if (payment.eventId) {
      tx.create('payment_event', {
        ...paymentEventKey(payment.eventId),
        entity: 'payment_event',
        event_id: payment.eventId,
        checkout_session_id: csId,
        applied_at: at.toISOString(),
        ttl: Math.floor(at.getTime() / 1000) + 90 * 86_400,
      });
    }
    // D33: purchased credits never expire; bonus credits expire 12 months after issue.
    grantCreditsMany(
      tx,
      orgId,
      env,
      [
        { type: 'purchase', amountCents: amount, description: `Credit purchase (${csId})`, expiresAt: null },
        { type: 'bonus', amountCents: bonus, description: `Purchase bonus (${csId})`, expiresAt: twelveMonthsAfter(at) },
      ],
      versionCondition(bal ? Number(bal.version ?? 0) : null),
      env === 'live',
    );
    if (env === 'live') {
      tx.update('organization', keys.organization(orgId), `SET has_purchased = :y${payment.paymentMethod ? ', payment_method = :pm' : ''}`, {
        condition: 'attribute_exists(PK)',
        values: { ':y': true, ...(payment.paymentMethod ? { ':pm': payment.paymentMethod } : {}) },
      });
      // D13: test keys have the same limits; both balances carry the tier's copy (issue 15).
      const mark = purchaseMarkOnTestBalance(orgId);
      tx.update('balance:test', mark.key, mark.expression, { names: mark.names, values: mark.values });
    }
    const total = amount + bonus;
    emit(tx, { orgId, env, type: 'credits.purchased', data: { checkout_session_id: csId, amount_cents: amount, bonus_cents: bonus, total_credits_cents: total } });
    if (s.kind === 'auto_top_up') {
      emit(tx, { orgId, env, type: 'credits.auto_topped_up', data: { amount_cents: amount, balance_cents: before + total } });
    }
    audit(tx, {
      orgId,
      eventType: s.kind === 'auto_top_up' ? 'credits.auto_topped_up' : 'credits.purchased',
      actor: { type: 'system', id: `payment_provider:${s.provider as string}` },
      env,
      resource: { type: 'checkout_session', id: csId },
      requestId: null,
      data: { amount_cents: amount, bonus_cents: bonus, provider_ref: payment.providerRef },
    });
    const paid: Item = { ...s, status: 'paid', paid_at: at.toISOString(), payment_method: payment.paymentMethod, payment_ref: payment.providerRef };
    alsoInTx?.(tx, paid);
    try {
      await tx.commit();
      return { outcome: 'paid', session: paid };
    } catch (e) {
      if (!(e instanceof ConditionFailed)) throw e;
      if (payment.eventId && (await paymentEventSeen(payment.eventId))) return { outcome: 'already_paid', session: await getSession(csId) };
      // Session no longer open (re-read says why) or the balance moved (retry on a fresh snapshot).
      await new Promise((r) => setTimeout(r, Math.random() * 20 * (attempt + 1)));
    }
  }
  throw new Error(`confirmCheckout ${csId}: too much contention`);
}
