/**
 * The credit-expiry sweep (D33): an EventBridge schedule in the stack, a timer in the local
 * runtime, a direct call with the injectable clock in tests.
 *
 * It reads the sparse index of lots that can expire (GSI1 `LOTS#EXPIRING`, by expiry) up to 30 days
 * ahead, and per lot (re-read consistently):
 * - expired with credits left: `expiration` row (−remaining), lot emptied and taken out of the
 *   index, `available` lowered, `credits.expired` — one transaction conditioned on the remaining
 *   amount and the balance version (exactly once, and the D34 low-balance crossing is exact);
 * - expired and empty: taken out of the index (a refund to it puts it back, see lots.creditLot);
 * - expiring within 30 days with credits left: `credits.expiring_soon`, once per lot (flag).
 */
import { GetCommand, paginateQuery } from '@aws-sdk/lib-dynamodb';
import { db, tableName } from '../db/client';
import { keys, indexKeys } from '../db/keys';
import { Tx } from '../db/tx';
import { now, addMs, DAY_MS } from '../clock';
import { emit } from '../outbox';
import { audit } from '../audit';
import { ConditionFailed } from '../errors';
import { logger } from '../logger';
import { writeLedgerRow } from './lots';
import { readBalanceItem, versionCondition, lowBalanceCheck } from './balance';
import type { Env } from '../types';

export const EXPIRING_SOON_MS = 30 * DAY_MS;

export interface SweepResult {
  expired: number;
  expiredCents: number;
  warned: number;
}

type Item = Record<string, unknown>;

export async function sweepCreditLots(at: Date = now()): Promise<SweepResult> {
  const result: SweepResult = { expired: 0, expiredCents: 0, warned: 0 };
  const horizon = addMs(at, EXPIRING_SOON_MS).toISOString();
  const ix = indexKeys.expiringLots();
  const pages = paginateQuery(
    { client: db() },
    {
      TableName: tableName(),
      IndexName: ix.index,
      KeyConditionExpression: 'GSI1PK = :pk AND GSI1SK < :h',
      ExpressionAttributeValues: { ':pk': ix.pk, ':h': `${horizon}~` },
    },
  );
  for await (const page of pages) {
    for (const entry of page.Items ?? []) {
      try {
        await sweepLot(entry, at, result);
      } catch (err) {
        logger.error('credit lot sweep failed; retried next run', { lot_id: entry.id as string, error: err as Error });
      }
    }
  }
  return result;
}

async function sweepLot(entry: Item, at: Date, result: SweepResult): Promise<void> {
  const key = { PK: entry.PK as string, SK: entry.SK as string };
  for (let attempt = 0; attempt < 8; attempt++) {
    const lot = (await db().send(new GetCommand({ TableName: tableName(), Key: key, ConsistentRead: true }))).Item;
    if (!lot || !lot.GSI1PK) return;
    const orgId = lot.org_id as string;
    const env = lot.environment as Env;
    const remaining = Number(lot.remaining_cents ?? 0);
    const expiresAt = lot.expires_at as string;
    const tx = new Tx();
    if (new Date(expiresAt).getTime() <= at.getTime()) {
      tx.update(`lot:${lot.id as string}`, key, 'SET remaining_cents = :zero, expired_at = :t REMOVE GSI1PK, GSI1SK', {
        condition: 'remaining_cents = :r',
        values: { ':zero': 0, ':t': at.toISOString(), ':r': remaining },
      });
      if (remaining > 0) {
        const bal = await readBalanceItem(orgId, env);
        const before = Number(bal?.available_cents ?? 0);
        const v = versionCondition(bal ? Number(bal.version ?? 0) : null);
        tx.update('balance', keys.balance(orgId, env), 'ADD available_cents :neg, version :one SET updated_at = :t', {
          condition: v.condition,
          values: { ...v.values, ':neg': -remaining, ':one': 1, ':t': at.toISOString() },
        });
        writeLedgerRow(tx, orgId, env, { type: 'expiration', amountCents: -remaining, description: `Expired ${lot.source as string} credits`, lotId: lot.id as string, expiresAt });
        emit(tx, { orgId, env, type: 'credits.expired', data: { amount_cents: remaining, lot_id: lot.id, expires_at: expiresAt } });
        audit(tx, {
          orgId,
          eventType: 'credits.expired',
          actor: { type: 'system', id: 'credit-expiry-sweep' },
          env,
          resource: { type: 'credit_lot', id: lot.id as string },
          requestId: null,
          data: { amount_cents: remaining },
        });
        await lowBalanceCheck(tx, orgId, env, before, before - remaining); // D34: the event queues the auto top-up
      }
    } else if (remaining > 0 && !lot.expiring_soon_notified_at) {
      tx.update(`lot:${lot.id as string}`, key, 'SET expiring_soon_notified_at = :t', {
        condition: 'attribute_not_exists(expiring_soon_notified_at)',
        values: { ':t': at.toISOString() },
      });
      emit(tx, { orgId, env, type: 'credits.expiring_soon', data: { amount_cents: remaining, expires_at: expiresAt, lot_id: lot.id } });
    } else {
      return;
    }
    try {
      await tx.commit();
    } catch (e) {
      if (e instanceof ConditionFailed) continue; // the lot or balance moved: look again
      throw e;
    }
    if (new Date(expiresAt).getTime() <= at.getTime()) {
      if (remaining > 0) {
        result.expired++;
        result.expiredCents += remaining;
      }
    } else result.warned++;
    return;
  }
}
