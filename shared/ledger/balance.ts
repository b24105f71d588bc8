/**
 * Balance reads and the low-balance / auto top-up hook (D31, D34).
 *
 * The balance item (`keys.balance(org, env)`): `available_cents`, `held_cents`, `version` (moves
 * with every change of `available`, see lots.ts), `active_jobs` (live jobs open, filled or
 * in_progress: the D18 free-tier guard), `updated_at`.
 */
import { GetCommand, paginateQuery } from '@aws-sdk/lib-dynamodb';
import { db, tableName } from '../db/client';
import { keys, indexKeys } from '../db/keys';
import { emit } from '../outbox';
import { getSettings } from '../orgs';
import { expiredAt, lotFromItem, type Lot } from './lots';
import type { Tx } from '../db/tx';
import type { Env } from '../types';

export interface BalanceSnapshot {
  available: number;
  held: number;
  /** null when the balance item does not exist yet. */
  version: number | null;
  activeJobs: number;
  updatedAt: string | null;
  lots: Lot[];
}

export async function readBalanceItem(orgId: string, env: Env, consistent = true) {
  const out = await db().send(new GetCommand({ TableName: tableName(), Key: keys.balance(orgId, env), ConsistentRead: consistent }));
  return out.Item;
}

/** The balance and its lots in expiry order (first to expire first), read consistently. */
export async function readBalance(orgId: string, env: Env, withLots = true): Promise<BalanceSnapshot> {
  const [item, lots] = await Promise.all([readBalanceItem(orgId, env), withLots ? readLots(orgId, env) : Promise.resolve([])]);
  return balanceSnapshot(item, lots);
}

/** The snapshot of a balance item read elsewhere (e.g. in a batch) and its lots. */
export function balanceSnapshot(item: Record<string, unknown> | undefined, lots: Lot[]): BalanceSnapshot {
  return {
    available: Number(item?.available_cents ?? 0),
    held: Number(item?.held_cents ?? 0),
    version: item ? Number(item.version ?? 0) : null,
    activeJobs: Number(item?.active_jobs ?? 0),
    updatedAt: (item?.updated_at as string | undefined) ?? null,
    lots,
  };
}

/**
 * What a snapshot can spend at `at` (D33): the credits of its lots that have not expired, never
 * more than the balance read. `available_cents` still counts a lot that has expired until the sweep
 * writes its `expiration` row (so that it always equals the sum of the ledger rows, D31); those
 * credits are `expired` here and are never drawn. Answers both.
 */
export function spendableAt(snap: BalanceSnapshot, at: string): { spendable: number; expired: number } {
  let unexpired = 0;
  let expired = 0;
  for (const lot of snap.lots) {
    if (lot.remaining <= 0) continue;
    if (expiredAt(lot, at)) expired += lot.remaining;
    else unexpired += lot.remaining;
  }
  return { spendable: Math.max(0, Math.min(snap.available, unexpired)), expired };
}

export async function readLots(orgId: string, env: Env): Promise<Lot[]> {
  const ix = indexKeys.tenantCreditLots(orgId, env);
  const lots: Lot[] = [];
  const pages = paginateQuery(
    { client: db() },
    { TableName: tableName(), KeyConditionExpression: 'PK = :pk AND begins_with(SK, :p)', ExpressionAttributeValues: { ':pk': ix.pk, ':p': ix.skPrefix }, ConsistentRead: true },
  );
  for await (const page of pages) for (const it of page.Items ?? []) lots.push(lotFromItem(it));
  return lots;
}

/** Condition that the balance is still the snapshot that was read (see lots.ts `version`). */
export function versionCondition(version: number | null): { condition: string; values: Record<string, unknown> } {
  return version === null
    ? { condition: 'attribute_not_exists(version)', values: {} }
    : { condition: 'version = :v', values: { ':v': version } };
}

/**
 * D34 for a drop of `amount` from a balance read as `before`, against threshold T, without
 * serialising writers on an exact snapshot: the update asserts the regime the read saw (no
 * crossing: before ≥ T + amount; already below: before < T), so concurrent drops conflict only at
 * the threshold, and a crossing is reported by exactly one transaction. The crossing itself
 * (T ≤ before < T + amount) is asserted on the exact balance read: its `credits.low_balance`
 * carries the balance after the drop, which only the exact balance makes true (another writer's
 * escrow or refund in between would otherwise move it). The condition also guarantees
 * available ≥ amount.
 */
export function dropRegime(before: number, amount: number, threshold: number): { condition: string; values: Record<string, unknown>; crossing: boolean } {
  if (before - amount >= threshold) return { condition: 'available_cents >= :rMin', values: { ':rMin': threshold + amount }, crossing: false };
  if (before >= threshold) {
    return { condition: 'available_cents = :rAt AND available_cents >= :rAmt', values: { ':rAt': before, ':rAmt': amount }, crossing: true };
  }
  return { condition: 'available_cents >= :rAmt AND available_cents < :rT', values: { ':rAmt': amount, ':rT': threshold }, crossing: false };
}

type Settings = Awaited<ReturnType<typeof getSettings>>;

/**
 * D34: emit `credits.low_balance`. With auto top-up enabled, the event's INSERT record queues the
 * top-up (pipe `auto-top-up`, shared/billing/auto-top-up.ts): nothing to run after the commit.
 */
export function emitLowBalance(tx: Tx, orgId: string, env: Env, after: number, s: Settings): void {
  emit(tx, {
    orgId,
    env,
    type: 'credits.low_balance',
    data: { balance_cents: after, threshold_cents: s.auto_top_up_threshold_cents, auto_top_up_enabled: s.auto_top_up_enabled },
  });
}

/**
 * D34 for a drop committed on the exact balance version (`before` exact): emits
 * `credits.low_balance` when before ≥ threshold > after (and with it, when enabled, the auto
 * top-up). Answers whether it did.
 */
export async function lowBalanceCheck(tx: Tx, orgId: string, env: Env, before: number, after: number): Promise<boolean> {
  if (env !== 'live' || after >= before) return false;
  const s = await getSettings(orgId);
  const threshold = s.auto_top_up_threshold_cents;
  if (!(before >= threshold && after < threshold)) return false;
  emitLowBalance(tx, orgId, env, after, s);
  return true;
}
