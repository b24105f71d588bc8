/**
 * Strongly consistent BatchGetItem of any number of keys of the table: chunks of 100 (the service
 * limit) in parallel, unprocessed keys retried with backoff. Answers the items found, by key.
 */
import { BatchGetCommand } from '@aws-sdk/lib-dynamodb';
import { db, tableName } from './client';
import type { Key } from './keys';

export type ItemsByKey = Map<string, Record<string, unknown>>;

/** The map key of an item or key: `PK|SK`. */
export const keyId = (k: { PK?: unknown; SK?: unknown }): string => `${String(k.PK)}|${String(k.SK)}`;

export async function batchGetConsistent(all: Key[]): Promise<ItemsByKey> {
  const found: ItemsByKey = new Map();
  const unique = [...new Map(all.map((k) => [keyId(k), k])).values()];
  const chunks: Key[][] = [];
  for (let i = 0; i < unique.length; i += 100) chunks.push(unique.slice(i, i + 100));
  await Promise.all(
    chunks.map(async (chunk) => {
      let pending: Key[] = chunk;
      for (let attempt = 0; pending.length > 0; attempt++) {
        if (attempt > 8) throw new Error('BatchGetItem: keys stayed unprocessed');
        if (attempt > 0) await new Promise((r) => setTimeout(r, Math.random() * 20 * 2 ** attempt));
        const out = await db().send(new BatchGetCommand({ RequestItems: { [tableName()]: { Keys: pending, ConsistentRead: true } } }));
        for (const it of (out.Responses?.[tableName()] as Record<string, unknown>[] | undefined) ?? []) found.set(keyId(it), it);
        pending = (out.UnprocessedKeys?.[tableName()]?.Keys as Key[] | undefined) ?? [];
      }
    }),
  );
  return found;
}
