/**
 * An organization's rate tier (D13: free until its first completed live purchase, then standard;
 * an enterprise override), and where a request reads it (issue 15).
 *
 * The organization item holds the tier: `has_purchased` and the override `rate_limits`. Each of
 * its two balance items carries a copy, written in the same transaction as the original: a live
 * purchase marks both balances purchased, and `setRateLimitOverride` writes the override on all
 * three. `has_purchased` never goes back to false, so once this process has read an organization
 * as purchased, with the key's balance carrying the same tier, a request of that key reads the
 * tier from the balance it reads anyway (for the credits header): its batch reads one item fewer.
 * A balance written before the copy existed (no mark) keeps the organization in the batch.
 */
import { GetCommand } from '@aws-sdk/lib-dynamodb';
import { Tx } from '../db/tx';
import { db, tableName } from '../db/client';
import { keys } from '../db/keys';
import { TIERS, type Limits } from '../ratelimit';
import { errors } from '../errors';
import type { Env } from '../types';

type Item = Record<string, unknown>;

const ENVS: readonly Env[] = ['live', 'test'];

/** The limits an organization item, or a balance item carrying its copy, stands for. */
export function limitsOf(item: Item | undefined): Limits {
  const o = item?.rate_limits;
  if (o && typeof o === 'object') return o as Limits;
  return item?.has_purchased === true ? TIERS.standard : TIERS.free;
}

/** Enough for every organization a warm function meets; the oldest entry goes first. */
const MAX_ENTRIES = 10_000;
const onBalance = new Set<string>();
const memoKey = (orgId: string, env: Env) => `${orgId}#${env}`;

/** Whether the key's balance item carries its organization's tier (learnt by this process). */
export function tierOnBalance(orgId: string, env: Env): boolean {
  return onBalance.has(memoKey(orgId, env));
}

/**
 * Learns from an organization item and the environment's balance item read together: when both
 * say purchased and hold the same override (or none), the balance carries the tier from now on.
 */
export function learnTier(orgId: string, env: Env, org: Item | undefined, balance: Item | undefined): void {
  if (org?.has_purchased !== true || balance?.has_purchased !== true) return;
  if (JSON.stringify(org.rate_limits ?? null) !== JSON.stringify(balance.rate_limits ?? null)) return;
  const k = memoKey(orgId, env);
  if (onBalance.has(k)) return;
  if (onBalance.size >= MAX_ENTRIES) onBalance.delete(onBalance.values().next().value!);
  onBalance.add(k);
}

/** Forgets what this process learnt (a balance that no longer carries the tier). */
export function forgetTier(orgId: string, env: Env): void {
  onBalance.delete(memoKey(orgId, env));
}

/**
 * The update that puts the tier's copy on a balance item, creating the item when absent with the
 * `version` writers condition on (shared/ledger/balance.ts), so a balance first written by the
 * copy is read like any other.
 */
export function balanceTierUpdate(orgId: string, env: Env, set: { purchased?: true; limits?: Limits | null }) {
  const sets = ['#v = if_not_exists(#v, :zero)', 'org_id = :o', 'environment = :e', 'entity = :ent'];
  const values: Item = { ':zero': 0, ':o': orgId, ':e': env, ':ent': 'balance' };
  const removes: string[] = [];
  if (set.purchased) {
    sets.push('has_purchased = :y');
    values[':y'] = true;
  }
  if (set.limits) {
    sets.push('rate_limits = :l');
    values[':l'] = set.limits;
  } else if (set.limits === null) {
    removes.push('rate_limits');
  }
  return {
    key: keys.balance(orgId, env),
    expression: `SET ${sets.join(', ')}${removes.length ? ` REMOVE ${removes.join(', ')}` : ''}`,
    names: { '#v': 'version' },
    values,
  };
}

/** The copy a live purchase writes on the test balance (the live one is marked by its grant). */
export const purchaseMarkOnTestBalance = (orgId: string) => balanceTierUpdate(orgId, 'test', { purchased: true });

/**
 * Sets (or, with null, removes) an organization's rate-limit override: on the organization and on
 * both balance items, in one transaction, so a request reading either sees the same limits. The
 * balances also get the purchase mark when the organization has it (bringing a balance written
 * before the copy existed up to date). The only way to change an override.
 */
export async function setRateLimitOverride(orgId: string, limits: Limits | null): Promise<void> {
  if (limits && !(Number.isSafeInteger(limits.perMinute) && limits.perMinute > 0 && Number.isSafeInteger(limits.perHour) && limits.perHour > 0)) {
    throw errors.validation('The override needs whole, positive perMinute and perHour limits.');
  }
  const org = (await db().send(new GetCommand({ TableName: tableName(), Key: keys.organization(orgId), ConsistentRead: true }))).Item;
  if (!org) throw errors.notFound('organization', orgId);
  const purchased = org.has_purchased === true ? { purchased: true as const } : {};
  const tx = new Tx();
  tx.update('organization', keys.organization(orgId), limits ? 'SET rate_limits = :l' : 'REMOVE rate_limits', {
    condition: 'attribute_exists(PK)',
    ...(limits ? { values: { ':l': limits } } : {}),
  });
  for (const env of ENVS) {
    const u = balanceTierUpdate(orgId, env, { ...purchased, limits });
    tx.update(`balance:${env}`, u.key, u.expression, { names: u.names, values: u.values });
  }
  await tx.commit();
}
