/**
 * DynamoDB's index lag, emulated in the local runtime when asked (`indexLagMs`).
 *
 * A global secondary index is updated from the table asynchronously: "changes to the table data
 * are propagated to the global secondary indexes within a fraction of a second, under normal
 * conditions", and a Query or Scan of one cannot be strongly consistent
 * (https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/GSI.html, "Reading data from
 * a global secondary index"). DynamoDB Local updates its indexes with the write, so no local run
 * showed whether our code relies on an index having taken in a write it just made.
 *
 * Here, while the emulation is on, every successful write of the process (PutItem, UpdateItem,
 * DeleteItem, BatchWriteItem, TransactWriteItems) notes when each of its items was last written,
 * and a Query or Scan of an index leaves out every item written less than `lagMs` before it is
 * answered: the index "has not yet taken it in". That is stricter than DynamoDB where it matters
 * to a caller that trusts an index: a new item is missing (as on DynamoDB), and so is an item just
 * updated (DynamoDB would still show its previous version) or moved into the partition queried.
 * What it does not show: an item just deleted, or just moved out of the partition queried, which
 * DynamoDB may still list for a moment (DynamoDB Local has already dropped it), and a
 * `Select: COUNT` query's count (none of ours counts an index). `ScannedCount` leaves out the
 * items not yet taken in, those a filter dropped included (found by reading the same page again,
 * keys only and unfiltered), as an export compares it with the job's approved count. Reads of the
 * table itself, strongly consistent or not, are left as they are. Per process, like the conflict
 * emulation.
 */
import { setLocalCallWrap } from '../shared/observability/invocation';
import { TABLE_DEF } from '../shared/db/table';

type Attrs = Record<string, unknown>;
interface ItemRef {
  TableName?: string;
  Key?: Attrs;
  Item?: Attrs;
}

/** An item's table and key, whether the attributes are marshalled (`{S: …}`, the raw client) or not (the document client). */
function keyOf(table: string | undefined, attrs: Attrs | undefined): string | null {
  if (!table || !attrs) return null;
  const part = (v: unknown) => (v && typeof v === 'object' && 'S' in (v as Attrs) ? (v as { S: string }).S : v);
  return JSON.stringify([table, part(attrs[TABLE_DEF.partitionKey]), part(attrs[TABLE_DEF.sortKey])]);
}

/** The items a successful write wrote (a ConditionCheck writes nothing). */
function written(command: string, input: unknown): (string | null)[] {
  const i = (input ?? {}) as ItemRef & { TransactItems?: Record<string, ItemRef>[]; RequestItems?: Record<string, { PutRequest?: { Item?: Attrs }; DeleteRequest?: { Key?: Attrs } }[]> };
  switch (command) {
    case 'PutItemCommand':
    case 'UpdateItemCommand':
    case 'DeleteItemCommand':
      return [keyOf(i.TableName, i.Key ?? i.Item)];
    case 'BatchWriteItemCommand':
      return Object.entries(i.RequestItems ?? {}).flatMap(([table, requests]) => requests.map((r) => keyOf(table, r.DeleteRequest?.Key ?? r.PutRequest?.Item)));
    case 'TransactWriteItemsCommand':
      return (i.TransactItems ?? []).map((a) => {
        const ref = a.Put ?? a.Update ?? a.Delete;
        return ref ? keyOf(ref.TableName, ref.Key ?? ref.Item) : null;
      });
    default:
      return [];
  }
}

/** When each item was last written (Date.now()), for the writes of the last `lagMs`. */
const lastWritten = new Map<string, number>();
/** When the latest write was noted. */
let newest = 0;
let lagMs = 0;

function forget(now: number): void {
  for (const [id, at] of lastWritten) if (now - at >= lagMs) lastWritten.delete(id);
}

const KEY_NAMES = [TABLE_DEF.partitionKey, TABLE_DEF.sortKey];
type IndexRead = {
  TableName?: string;
  IndexName?: string;
  KeyConditionExpression?: string;
  FilterExpression?: string;
  ProjectionExpression?: string;
  Select?: string;
  ExpressionAttributeNames?: Record<string, string>;
  ExpressionAttributeValues?: Attrs;
};

/**
 * The same page of the same read without its filter, projecting only the table's key: the items it
 * scanned. Names and values only the filter or projection used are dropped (DynamoDB refuses
 * unused ones).
 */
function keysOnlyUnfiltered(q: IndexRead): IndexRead {
  const { FilterExpression: _filter, ProjectionExpression: _projection, Select: _select, ExpressionAttributeNames: names, ExpressionAttributeValues: values, ...rest } = q;
  const projection = KEY_NAMES.map((_, n) => `#indexLagKey${n}`).join(', ');
  const used = `${q.KeyConditionExpression ?? ''} ${projection}`;
  const refers = (token: string) => new RegExp(`${token.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}(?![A-Za-z0-9_])`).test(used);
  const keptValues = Object.entries(values ?? {}).filter(([k]) => refers(k));
  return {
    ...rest,
    ProjectionExpression: projection,
    ExpressionAttributeNames: { ...Object.fromEntries(Object.entries(names ?? {}).filter(([k]) => refers(k))), ...Object.fromEntries(KEY_NAMES.map((k, n) => [`#indexLagKey${n}`, k])) },
    ...(keptValues.length ? { ExpressionAttributeValues: Object.fromEntries(keptValues) } : {}),
  };
}

/**
 * An index read whose projection leaves out the table's key (e.g. `ProjectionExpression: 'id'`)
 * asks for the key too, so that its items can be told apart; `strip` takes it out of the answer
 * again. Every index projects the table's key, so DynamoDB would answer the same items.
 */
function withKey(q: IndexRead): { input: IndexRead; strip: string[] } {
  if (!q.ProjectionExpression) return { input: q, strip: [] };
  const names = q.ExpressionAttributeNames ?? {};
  const projected = q.ProjectionExpression.split(',').map((p) => p.trim()).map((p) => names[p] ?? p);
  const missing = KEY_NAMES.filter((k) => !projected.includes(k));
  if (!missing.length) return { input: q, strip: [] };
  const extra = missing.map((k, n) => [`#indexLagKey${n}`, k] as const);
  return {
    input: { ...q, ProjectionExpression: [q.ProjectionExpression, ...extra.map(([alias]) => alias)].join(', '), ExpressionAttributeNames: { ...names, ...Object.fromEntries(extra) } },
    strip: missing,
  };
}

/** Every DynamoDB call while the emulation is on: writes noted; an index read without the items it has not yet taken in. */
async function indexAsLagging(client: string, command: string, input: unknown, send: (input: unknown) => Promise<{ output?: unknown }>): Promise<{ output?: unknown }> {
  if (client !== 'DynamoDBClient' || lagMs <= 0) return send(input);
  const q = input as IndexRead;
  if ((command !== 'QueryCommand' && command !== 'ScanCommand') || !q.IndexName) {
    const answer = await send(input);
    const ids = written(command, input);
    if (ids.length) {
      const now = Date.now();
      newest = now;
      for (const id of ids) if (id) lastWritten.set(id, now);
      if (lastWritten.size > 10_000) forget(now);
    }
    return answer;
  }
  // Nothing written within the lag, or a count without items (Select COUNT, not emulated): as answered.
  if (Date.now() - newest >= lagMs || q.Select === 'COUNT') return send(input);
  const { input: asked, strip } = withKey(q);
  const answer = await send(asked);
  const out = answer.output as { Items?: Attrs[]; Count?: number; ScannedCount?: number } | undefined;
  if (!out?.Items) return answer;
  const now = Date.now();
  // Written before this answer and less than the lag before it (a write after it is not counted).
  const lagging = (item: Attrs) => {
    const at = lastWritten.get(keyOf(q.TableName, item) ?? '');
    return at !== undefined && at <= now && now - at < lagMs;
  };
  const seen = (out.Items ?? []).filter((item) => !lagging(item));
  // An item the index has not taken in is not read at all: ScannedCount leaves out those the
  // filter dropped too, found by reading the same page again without the filter (keys only).
  let scannedHidden = (out.Items?.length ?? 0) - seen.length;
  if (q.FilterExpression && (out.ScannedCount ?? 0) > (out.Count ?? 0)) {
    const all = ((await send(keysOnlyUnfiltered(q))).output as { Items?: Attrs[] } | undefined)?.Items ?? [];
    scannedHidden = all.filter(lagging).length;
  }
  const items = strip.length ? seen.map((item) => Object.fromEntries(Object.entries(item).filter(([k]) => !strip.includes(k)))) : seen;
  const scanned = out.ScannedCount === undefined ? {} : { ScannedCount: Math.max(0, out.ScannedCount - scannedHidden) };
  return { ...answer, output: { ...out, Items: items, Count: items.length, ...scanned } };
}

/** Turns the emulation on (`ms` > 0) for every DynamoDB call of this process, or off (0). */
export function emulateIndexLag(ms: number): void {
  lagMs = ms;
  newest = 0;
  lastWritten.clear();
  setLocalCallWrap(ms > 0 ? indexAsLagging : null);
}

/**
 * Resolves once every write noted so far is older than the lag, so the indexes hold it (at once
 * while the emulation is off), and the writes that follow from them have settled too: the wait
 * goes on while writes keep coming (a consumer updating the item just written, as the webhook
 * dispatcher does with every event), until nothing has been written for the lag or `settleMs`
 * have passed beyond the writes made before the call. For tests whose subject is what a list
 * shows, not when: a client cannot know this moment and waits by long-polling, a webhook or
 * polling the list.
 */
export async function indexesCaughtUp(settleMs = 3_000): Promise<void> {
  if (lagMs <= 0) return;
  const before = newest + lagMs; // when the writes made so far are all in the indexes
  const giveUp = Math.max(Date.now(), before) + settleMs;
  for (;;) {
    const at = Date.now();
    const quiet = newest + lagMs; // when every write so far, later ones included, is in the indexes
    if (at >= quiet || (at >= before && at >= giveUp)) return;
    await new Promise((resolve) => setTimeout(resolve, Math.max(1, Math.min(quiet, Math.max(before, giveUp)) - at + 1)));
  }
}
