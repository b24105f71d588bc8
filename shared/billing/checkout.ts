/**
 * Credit purchases (D32) and auto top-up (D34).
 *
 * A checkout session (`CS#<cs_id>`) is created `open`; the payment provider confirms it and
 * `confirmCheckout` applies it exactly once: the session moves open → paid under a condition in the
 * same transaction as the `purchase` and `bonus` rows, their lots, the balance, the organization's
 * `has_purchased` flag (D13/D52 standard tier) and saved payment method, `credits.purchased` and
 * the audit record. A second confirmation (double click, replayed POST, provider retry) finds the
 * session paid and changes nothing.
 */
import { GetCommand } from '@aws-sdk/lib-dynamodb';
import { db, tableName } from '../db/client';
import { keys } from '../db/keys';
import { Tx } from '../db/tx';
import { newId } from '../ids';
import { now, nowIso, addMs, DAY_MS } from '../clock';
import { emit } from '../outbox';
import { audit } from '../audit';
import { ConditionFailed } from '../errors';
import { logger } from '../logger';
import { recordResponse, systemContext, type MutationContext } from '../context';
import { grantCreditsMany, twelveMonthsAfter } from '../ledger/lots';
import { readBalanceItem, versionCondition } from '../ledger/balance';
import { paymentProvider } from './provider';
import type { Actor, BuyerPrincipal, Env } from '../types';

export const PURCHASE_MIN_CENTS = 1000;
export const PURCHASE_MAX_CENTS = 100_000;
/** D32: the bonus percentage of the highest pack at or below the amount. */
const PACKS: readonly [number, number][] = [
  [25_000, 20],
  [10_000, 15],
  [5_000, 10],
  [2_500, 5],
  [1_000, 0],
];
export const bonusFor = (amount: number) => Math.floor((amount * (PACKS.find(([min]) => amount >= min)?.[1] ?? 0)) / 100);

type Item = Record<string, unknown>;

export function presentSession(s: Item) {
  return {
    object: 'checkout_session' as const,
    id: s.id as string,
    status: s.status as string,
    checkout_url: s.checkout_url as string,
    amount_cents: Number(s.amount_cents),
    bonus_cents: Number(s.bonus_cents),
    total_credits_cents: Number(s.total_credits_cents),
    expires_at: s.expires_at as string,
  };
}

function addSession(tx: Tx, actor: Actor, requestId: string | null, orgId: string, env: Env, amount: number, kind: 'checkout' | 'auto_top_up') {
  const id = newId('checkoutSession');
  const bonus = bonusFor(amount);
  const item = {
    ...keys.checkoutSession(id),
    entity: 'checkout_session',
    id,
    kind,
    org_id: orgId,
    environment: env,
    status: 'open',
    provider: paymentProvider().name,
    amount_cents: amount,
    bonus_cents: bonus,
    total_credits_cents: amount + bonus,
    checkout_url: paymentProvider().checkoutUrl(id),
    created_at: nowIso(),
    expires_at: addMs(now(), DAY_MS).toISOString(),
  };
  tx.create('checkout_session', item);
  audit(tx, {
    orgId,
    eventType: 'credits.checkout_created',
    actor,
    env,
    resource: { type: 'checkout_session', id },
    requestId,
    data: { amount_cents: amount, bonus_cents: bonus, kind },
  });
  return item;
}

/** POST /v1/billing/credits/purchase (and its alias): a checkout session, 200 (D32, D43). */
export async function createCheckoutSession(ctx: MutationContext, p: BuyerPrincipal, amount: number) {
  const tx = new Tx();
  const view = presentSession(addSession(tx, ctx.actor, ctx.requestId, p.orgId, p.env, amount, 'checkout'));
  recordResponse(ctx, tx, view);
  await tx.commit();
  return view;
}

export async function getSession(id: string): Promise<Item | undefined> {
  const out = await db().send(new GetCommand({ TableName: tableName(), Key: keys.checkoutSession(id), ConsistentRead: true }));
  return out.Item;
}

export type ConfirmOutcome = 'paid' | 'already_paid' | 'expired' | 'not_found';

/** Apply a paid session exactly once. Safe to call any number of times, concurrently. */
export async function confirmCheckout(
  csId: string,
  payment: { paymentMethod: string; providerRef: string },
): Promise<{ outcome: ConfirmOutcome; session?: Item }> {
  for (let attempt = 0; attempt < 12; attempt++) {
    const s = await getSession(csId);
    if (!s) return { outcome: 'not_found' };
    if (s.status === 'paid') return { outcome: 'already_paid', session: s };
    if (new Date(s.expires_at as string).getTime() <= now().getTime()) return { outcome: 'expired', session: s };
    const orgId = s.org_id as string;
    const env = s.environment as Env;
    const amount = Number(s.amount_cents);
    const bonus = Number(s.bonus_cents);
    const at = now();
    const bal = await readBalanceItem(orgId, env);
    const before = Number(bal?.available_cents ?? 0);
    const tx = new Tx();
    tx.update('checkout_session', keys.checkoutSession(csId), 'SET #s = :paid, paid_at = :t, payment_method = :pm, provider_ref = :ref', {
      condition: '#s = :open AND expires_at > :t',
      names: { '#s': 'status' },
      values: { ':paid': 'paid', ':open': 'open', ':t': at.toISOString(), ':pm': payment.paymentMethod, ':ref': payment.providerRef },
    });
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
    );
    if (env === 'live') {
      tx.update('organization', keys.organization(orgId), 'SET has_purchased = :y, payment_method = :pm', {
        condition: 'attribute_exists(PK)',
        values: { ':y': true, ':pm': payment.paymentMethod },
      });
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
    try {
      await tx.commit();
      return { outcome: 'paid', session: { ...s, status: 'paid' } };
    } catch (e) {
      if (!(e instanceof ConditionFailed)) throw e;
      // Session no longer open (re-read says why) or the balance moved (retry on a fresh snapshot).
      await new Promise((r) => setTimeout(r, Math.random() * 20 * (attempt + 1)));
    }
  }
  throw new Error(`confirmCheckout ${csId}: too much contention`);
}

/**
 * D34 auto top-up, run after the transaction that crossed the low-balance threshold committed:
 * charge the payment method on file (left by the first hosted checkout) through the provider and
 * apply it like any purchase, plus `credits.auto_topped_up`. No payment method: nothing happens.
 */
export async function runAutoTopUp(orgId: string, env: Env, amount: number): Promise<ConfirmOutcome | null> {
  const out = await db().send(new GetCommand({ TableName: tableName(), Key: keys.organization(orgId), ConsistentRead: true }));
  const pm = out.Item?.payment_method as string | undefined;
  if (!pm) return null;
  const tx = new Tx();
  const session = addSession(tx, systemContext('auto_top_up').actor, null, orgId, env, amount, 'auto_top_up');
  await tx.commit();
  const charge = await paymentProvider().chargeSaved({ paymentMethod: pm, amountCents: amount, reference: session.id });
  const r = await confirmCheckout(session.id, { paymentMethod: pm, providerRef: charge.providerRef });
  logger.info('auto top-up', { org_id: orgId, amount_cents: amount, outcome: r.outcome });
  return r.outcome;
}
