/**
 * Credit lots and ledger rows (D31, D33). Every credit that enters a balance is a lot (so spending
 * can draw from the lot that expires first) plus a `credit_transaction` row, written in the caller's
 * transaction together with the balance change.
 *
 * Invariants kept by every function of shared/ledger (checked by test/domain/ledger*.test.ts):
 * - Σ lot.remaining_cents = balance.available_cents (lots are the breakdown of `available`);
 * - the three identities of D31 over the ledger rows;
 * - `balance.version` moves on every change of `available` (grants, escrow, refund, expiry), so a
 *   writer that read the balance and its lots can commit on `version = :read` and know its snapshot
 *   was exact. Deductions only move `held`, so approvals never contend with job creation.
 */
import { keys, gsi } from '../db/keys';
import { newId } from '../ids';
import { nowIso } from '../clock';
import type { Tx } from '../db/tx';
import type { Env } from '../types';

export type TransactionType = 'purchase' | 'deduction' | 'free_tier' | 'bonus' | 'expiration' | 'refund' | 'escrow' | 'reversal';
export const TRANSACTION_TYPES: readonly TransactionType[] = ['purchase', 'deduction', 'free_tier', 'bonus', 'expiration', 'refund', 'escrow', 'reversal'];

/** D33: purchased credits never expire; they all live in one perpetual lot per tenant. */
export const PERPETUAL_LOT_ID = 'lot_PURCHASED';

export interface LedgerRow {
  type: TransactionType;
  amountCents: number;
  description: string;
  jobId?: string | null;
  submissionId?: string | null;
  expiresAt?: string | null;
  lotId?: string | null;
}

/** Append one ledger row (a `credit_transaction`). Returns its id. */
export function writeLedgerRow(tx: Tx, orgId: string, env: Env, row: LedgerRow): string {
  const id = newId('transaction');
  tx.create(`ledger:${row.type}:${id}`, {
    ...keys.transaction(orgId, env, id),
    ...gsi.transaction(orgId, env, row.type, id),
    entity: 'credit_transaction',
    id,
    org_id: orgId,
    environment: env,
    type: row.type,
    amount_cents: row.amountCents,
    description: row.description,
    job_id: row.jobId ?? null,
    submission_id: row.submissionId ?? null,
    expires_at: row.expiresAt ?? null,
    lot_id: row.lotId ?? null,
    created_at: nowIso(),
  });
  return id;
}

/** A lot as stored; `sk` is its sort key (expiry order), the handle escrow sources refer to. */
export interface Lot {
  id: string;
  sk: string;
  expiresAt: string | null;
  remaining: number;
}

export const lotFromItem = (it: Record<string, unknown>): Lot => ({
  id: it.id as string,
  sk: it.SK as string,
  expiresAt: (it.expires_at as string | null) ?? null,
  remaining: Number(it.remaining_cents ?? 0),
});

/** D33: a lot whose credits are past their expiry at `at` (purchased credits never expire). */
export const expiredAt = (lot: Pick<Lot, 'expiresAt'>, at: string): boolean => lot.expiresAt !== null && Date.parse(lot.expiresAt) <= Date.parse(at);

/** The lot key from its sort key (org and env give the partition). */
export const lotKey = (orgId: string, env: Env, sk: string) => ({ PK: keys.balance(orgId, env).PK, SK: sk });

/**
 * Add `cents` back to a lot (a refund of escrow drawn from it). An expiring lot gets its sweep
 * index entry back, so credits returned to an already expired lot expire at the next sweep (D33).
 */
export function creditLot(tx: Tx, orgId: string, env: Env, lot: { sk: string; id: string; expiresAt: string | null }, cents: number): void {
  if (lot.expiresAt) {
    const g = gsi.expiringLot(lot.expiresAt, lot.id);
    tx.update(`lot:${lot.id}`, lotKey(orgId, env, lot.sk), 'ADD remaining_cents :c SET GSI1PK = :g1, GSI1SK = :g2', {
      condition: 'attribute_exists(PK)',
      values: { ':c': cents, ':g1': g.GSI1PK, ':g2': g.GSI1SK },
    });
  } else {
    tx.update(`lot:${lot.id}`, lotKey(orgId, env, lot.sk), 'ADD remaining_cents :c', {
      condition: 'attribute_exists(PK)',
      values: { ':c': cents },
    });
  }
}

/** Optional condition on the balance item (e.g. `versionCondition` of balance.ts). */
export type BalanceCond = { condition: string; values: Record<string, unknown> };

/**
 * The balance update of a grant: available up, version bump. A live purchase's grant also marks
 * the balance purchased (the copy of the organization's rate tier, shared/orgs/rate-tier.ts).
 */
export function balanceCreditUpdate(tx: Tx, orgId: string, env: Env, cents: number, cond?: BalanceCond, markPurchased = false): void {
  const mark = markPurchased ? ', has_purchased = :hp' : '';
  tx.update('balance', keys.balance(orgId, env), `ADD available_cents :a, version :one SET updated_at = :t, org_id = :o, environment = :e, entity = :ent${mark}`, {
    ...(cond ? { condition: cond.condition } : {}),
    values: { ':a': cents, ':one': 1, ':t': nowIso(), ':o': orgId, ':e': env, ':ent': 'balance', ...(markPurchased ? { ':hp': true } : {}), ...(cond?.values ?? {}) },
  });
}

/**
 * Grant credits: a lot, its ledger row, and `available_cents += amount` on the balance item, all
 * in `tx`. `expiresAt` null means the credits never expire (purchases, D33): they go to the
 * tenant's perpetual lot. Only one balance update per transaction is allowed by DynamoDB, so a
 * caller granting two amounts at once (purchase + bonus) uses `grantCreditsMany`.
 */
export function grantCredits(
  tx: Tx,
  orgId: string,
  env: Env,
  grant: Grant,
): { lotId: string; transactionId: string } {
  return grantCreditsMany(tx, orgId, env, [grant])[0]!;
}

export interface Grant {
  type: 'purchase' | 'free_tier' | 'bonus';
  amountCents: number;
  description: string;
  expiresAt: string | null;
}

export function grantCreditsMany(
  tx: Tx,
  orgId: string,
  env: Env,
  grants: Grant[],
  cond?: BalanceCond,
  markPurchased = false,
): { lotId: string; transactionId: string }[] {
  const at = nowIso();
  const out = grants
    .filter((g) => g.amountCents > 0)
    .map((grant) => {
      let lotId: string;
      if (grant.expiresAt === null) {
        lotId = PERPETUAL_LOT_ID;
        tx.update(
          `lot:${lotId}`,
          keys.creditLot(orgId, env, null, lotId),
          'ADD remaining_cents :a, original_cents :a SET entity = :ent, id = :id, org_id = :o, environment = :e, expires_at = :null, created_at = if_not_exists(created_at, :t)',
          { values: { ':a': grant.amountCents, ':ent': 'credit_lot', ':id': lotId, ':o': orgId, ':e': env, ':null': null, ':t': at } },
        );
      } else {
        lotId = newId('lot');
        tx.create(`lot:${lotId}`, {
          ...keys.creditLot(orgId, env, grant.expiresAt, lotId),
          ...gsi.expiringLot(grant.expiresAt, lotId),
          entity: 'credit_lot',
          id: lotId,
          org_id: orgId,
          environment: env,
          source: grant.type,
          original_cents: grant.amountCents,
          remaining_cents: grant.amountCents,
          expires_at: grant.expiresAt,
          created_at: at,
        });
      }
      const transactionId = writeLedgerRow(tx, orgId, env, {
        type: grant.type,
        amountCents: grant.amountCents,
        description: grant.description,
        expiresAt: grant.expiresAt,
        lotId,
      });
      return { lotId, transactionId, cents: grant.amountCents };
    });
  const total = out.reduce((s, g) => s + g.cents, 0);
  if (total > 0) balanceCreditUpdate(tx, orgId, env, total, cond, markPurchased);
  return out.map(({ lotId, transactionId }) => ({ lotId, transactionId }));
}

/** 12 months after `at` (D33). */
export function twelveMonthsAfter(at: Date): string {
  const d = new Date(at);
  d.setUTCFullYear(d.getUTCFullYear() + 1);
  return d.toISOString();
}
