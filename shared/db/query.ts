/**
 * Cursor pagination over one partition (table or GSI), newest first, with an exact `has_more`
 * (D12): we read until we hold limit+1 matching items or the partition is exhausted, so filters
 * never produce a `has_more: true` followed by an empty page.
 */
import { QueryCommand, type QueryCommandInput } from '@aws-sdk/lib-dynamodb';
import { db, tableName } from './client';
import { TABLE_DEF, type GsiName } from './table';
import { decodeCursor, encodeCursor } from '../cursor';

export interface PageQuery {
  index: GsiName | null;
  pk: string;
  /** Sort-key conditions (ids are ULID-based, so ranges are time ranges). */
  skPrefix?: string;
  skAfter?: string; // exclusive lower bound
  skBefore?: string; // exclusive upper bound
  filter?: { expression: string; names?: Record<string, string>; values?: Record<string, unknown> };
  limit: number;
  cursor?: string | null;
  /** What the cursor is bound to: the tenant and every filter value of the request. */
  binding: string;
  /** Oldest first instead of newest first. */
  ascending?: boolean;
  /**
   * Pages of the table itself are read strongly consistent unless this is false, so a list shows
   * the caller's own latest writes (a key just created, an endpoint just deleted), which an
   * eventually consistent read may not yet. An index page cannot be (DynamoDB refuses
   * ConsistentRead on a global secondary index): it can lag a write by a moment.
   */
  consistent?: boolean;
}

export interface Page<T> {
  items: T[];
  hasMore: boolean;
  nextCursor: string | null;
  /**
   * How many items the partition holds, before the filter, when this page read all of it (no
   * cursor, no sort-key bounds, nothing left): the sum of the reads' `ScannedCount`. Else null.
   */
  partitionCount: number | null;
}

function keyAttrs(index: GsiName | null): string[] {
  const base = [TABLE_DEF.partitionKey, TABLE_DEF.sortKey];
  if (!index) return base;
  const g = TABLE_DEF.gsis.find((x) => x.name === index)!;
  return [...base, g.partitionKey, g.sortKey];
}

export async function queryPage<T extends Record<string, unknown>>(q: PageQuery): Promise<Page<T>> {
  const g = q.index ? TABLE_DEF.gsis.find((x) => x.name === q.index)! : null;
  const pkName = g ? g.partitionKey : TABLE_DEF.partitionKey;
  const skName = g ? g.sortKey : TABLE_DEF.sortKey;
  const names: Record<string, string> = { '#pk': pkName, ...(q.filter?.names ?? {}) };
  const values: Record<string, unknown> = { ':pk': q.pk, ...(q.filter?.values ?? {}) };
  let kc = '#pk = :pk';
  if (q.skPrefix !== undefined) {
    names['#sk'] = skName;
    values[':skp'] = q.skPrefix;
    kc += ' AND begins_with(#sk, :skp)';
  } else if (q.skAfter !== undefined && q.skBefore !== undefined) {
    names['#sk'] = skName;
    values[':ska'] = q.skAfter;
    values[':skb'] = q.skBefore;
    kc += ' AND #sk BETWEEN :ska AND :skb';
  } else if (q.skAfter !== undefined) {
    names['#sk'] = skName;
    values[':ska'] = q.skAfter;
    kc += ' AND #sk > :ska';
  } else if (q.skBefore !== undefined) {
    names['#sk'] = skName;
    values[':skb'] = q.skBefore;
    kc += ' AND #sk < :skb';
  }

  let startKey = q.cursor ? await decodeCursor(q.cursor, q.binding) : undefined;
  const want = q.limit + 1;
  const items: T[] = [];
  const attrs = keyAttrs(q.index);
  let scanned = 0;
  let exhausted = false;
  for (;;) {
    const input: QueryCommandInput = {
      TableName: tableName(),
      IndexName: q.index ?? undefined,
      KeyConditionExpression: kc,
      ExpressionAttributeNames: names,
      ExpressionAttributeValues: values,
      ScanIndexForward: q.ascending ?? false,
      ExclusiveStartKey: startKey,
      Limit: q.filter ? Math.max(want * 2, 25) : want - items.length,
      ConsistentRead: q.index ? undefined : q.consistent ?? true,
      ...(q.filter ? { FilterExpression: q.filter.expression } : {}),
    };
    const out = await db().send(new QueryCommand(input));
    scanned += out.ScannedCount ?? 0;
    exhausted = !out.LastEvaluatedKey;
    for (const it of out.Items ?? []) {
      items.push(it as T);
      if (items.length >= want) break;
    }
    if (items.length >= want || !out.LastEvaluatedKey) break;
    startKey = out.LastEvaluatedKey;
  }
  const hasMore = items.length > q.limit;
  const page = items.slice(0, q.limit);
  const last = page[page.length - 1];
  const nextCursor =
    hasMore && last ? await encodeCursor(Object.fromEntries(attrs.map((a) => [a, last[a]])), q.binding) : null;
  const whole = !q.cursor && q.skPrefix === undefined && q.skAfter === undefined && q.skBefore === undefined && exhausted && !hasMore;
  return { items: page, hasMore, nextCursor, partitionCount: whole ? scanned : null };
}

/** The list envelope of the spec. */
export function listBody<T>(data: T[], page: Pick<Page<unknown>, 'hasMore' | 'nextCursor'>) {
  return { object: 'list' as const, data, has_more: page.hasMore, next_cursor: page.nextCursor };
}

/**
 * Every page of one table partition's items under a sort-key prefix, read strongly consistent with
 * DynamoDB's own LastEvaluatedKey: for internal loops that need all of it (no list cursor, which is
 * signed with a secret such loops are not granted). `count` asks for the count only (Select COUNT).
 */
export async function* partitionPages(
  part: { index: null; pk: string; skPrefix: string },
  opts: { count?: boolean } = {},
): AsyncGenerator<{ items: Record<string, unknown>[]; count: number }> {
  let startKey: Record<string, unknown> | undefined;
  do {
    const page = await db().send(
      new QueryCommand({
        TableName: tableName(),
        KeyConditionExpression: '#pk = :pk AND begins_with(#sk, :skp)',
        ExpressionAttributeNames: { '#pk': TABLE_DEF.partitionKey, '#sk': TABLE_DEF.sortKey },
        ExpressionAttributeValues: { ':pk': part.pk, ':skp': part.skPrefix },
        ConsistentRead: true,
        ExclusiveStartKey: startKey,
        ...(opts.count ? { Select: 'COUNT' as const } : {}),
      }),
    );
    yield { items: (page.Items ?? []) as Record<string, unknown>[], count: page.Count ?? 0 };
    startKey = page.LastEvaluatedKey;
  } while (startKey);
}
