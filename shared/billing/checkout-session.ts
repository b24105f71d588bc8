/**
 * The checkout session item (`CS#<cs_id>`, D32): the pack bonus it carries, its creation (with the
 * `credits.checkout_created` audit record), its strongly consistent read, and its API view.
 */
import { GetCommand } from '@aws-sdk/lib-dynamodb';
import { db, tableName } from '../db/client';
import { keys } from '../db/keys';
import type { Tx } from '../db/tx';
import { newId } from '../ids';
import { now, nowIso, addMs, DAY_MS } from '../clock';
import { audit } from '../audit';
import type { PaymentProvider } from './provider';
import type { Actor, Env } from '../types';

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
    checkout_url: (s.checkout_url as string | null | undefined) ?? null,
    amount_cents: Number(s.amount_cents),
    bonus_cents: Number(s.bonus_cents),
    total_credits_cents: Number(s.total_credits_cents),
    expires_at: s.expires_at as string,
  };
}

interface SessionInput {
  id?: string;
  orgId: string;
  env: Env;
  amount: number;
  kind: 'checkout' | 'auto_top_up';
  provider: PaymentProvider['name'] | 'test_mode';
  checkoutUrl: string | null;
  providerRef?: string | null;
}

export function addSession(tx: Tx, actor: Actor, requestId: string | null, s: SessionInput) {
  const { orgId, env, amount, kind } = s;
  const id = s.id ?? newId('checkoutSession');
  const bonus = bonusFor(amount);
  const item = {
    ...keys.checkoutSession(id),
    entity: 'checkout_session',
    id,
    kind,
    org_id: orgId,
    environment: env,
    status: 'open',
    provider: s.provider,
    provider_ref: s.providerRef ?? null,
    amount_cents: amount,
    bonus_cents: bonus,
    total_credits_cents: amount + bonus,
    checkout_url: s.checkoutUrl,
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

export async function getSession(id: string): Promise<Item | undefined> {
  const out = await db().send(new GetCommand({ TableName: tableName(), Key: keys.checkoutSession(id), ConsistentRead: true }));
  return out.Item;
}
