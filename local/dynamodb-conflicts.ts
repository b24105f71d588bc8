/**
 * DynamoDB's transaction conflicts, emulated in the local runtime (DynamoDB Local has none).
 *
 * DynamoDB (https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/transaction-apis.html,
 * "Transaction conflict handling in DynamoDB"; the API reference of TransactionCanceledException,
 * https://docs.aws.amazon.com/amazondynamodb/latest/APIReference/API_TransactWriteItems.html;
 * https://repost.aws/knowledge-center/dynamodb-transactwriteitems) refuses concurrent item-level
 * requests that meet an ongoing transaction:
 * - a PutItem, UpdateItem or DeleteItem of an item that an ongoing TransactWriteItems includes fails
 *   with `TransactionConflictException` ("Transaction is ongoing for the item");
 * - a TransactWriteItems naming an item that another ongoing TransactWriteItems includes, and a
 *   TransactGetItems naming an item of an ongoing TransactWriteItems, BatchWriteItem, PutItem,
 *   UpdateItem or DeleteItem, are cancelled: `TransactionCanceledException` with one
 *   `CancellationReasons` entry per action, in order, `{Code: 'TransactionConflict', Message:
 *   'Transaction is ongoing for the item'}` for the items met and `{Code: 'None'}` for the others.
 * Reads (GetItem, Query, Scan, BatchGetItem) never conflict. DynamoDB Local runs every request one
 * at a time and answers none of these, so no local run showed how our code behaves under them.
 *
 * Here every AWS SDK call of the process passes `conflictsOf` (shared/observability/invocation.ts
 * `setLocalAttemptWrap`, through `traced()`), once per attempt: the items of each TransactWriteItems
 * attempt are held from its sending to its answer (success or failure), those of each plain write
 * likewise (they matter only to TransactGetItems), and a request that meets a held item is answered
 * here, in DynamoDB's place, without being sent. Per process: the local runtime is one process.
 *
 * Where: the wrap runs in the SDK's `finalizeRequest` step, inside its retry loop and outside its
 * deserializer. So the emulated error reaches the SDK's retry strategy as DynamoDB's own answer
 * would: neither `TransactionConflictException` nor `TransactionCanceledException` is a throttling,
 * transient or server error to `@smithy/core/retry` (not in its THROTTLING_ERROR_CODES, status
 * 400, no `$retryable` trait in the DynamoDB model; only `TransactionInProgressException` is
 * retried), so the SDK does not retry them and the caller sees them at once, `$metadata.attempts`
 * 1, as deployed. Our code retries a transaction itself (shared/db/tx.ts). And at that step the
 * input is marshalled for the raw client and the document client alike (lib-dynamodb marshals just
 * before serializing), which `itemId` relies on.
 *
 * Not emulated: `TransactionInProgressException` (a ClientRequestToken reused while its first
 * transaction runs: our code sends none), a BatchWriteItem meeting a transaction (DynamoDB documents
 * no outcome), conflicts between separate processes, and the exact moment DynamoDB reaches an item:
 * held here for the whole round trip as this process sees it (`meets`), at least as strict, and
 * under load much longer than DynamoDB holds one (measured in the pipeline's 30-worker race: median
 * 29 ms, p90 164 ms, up to 1.1 s), so conflicts come more often here than deployed.
 */
import { randomUUID } from 'node:crypto';
import { TransactionCanceledException, TransactionConflictException, type CancellationReason } from '@aws-sdk/client-dynamodb';
import { decorateServiceException, type ServiceException } from '@smithy/core/client';
import { HttpResponse } from '@smithy/core/protocols';
import { TABLE_DEF } from '../shared/db/table';
import { setLocalAttemptWrap } from '../shared/observability/invocation';

interface ItemRef {
  TableName?: string;
  Key?: Record<string, unknown>;
  Item?: Record<string, unknown>;
}
type TransactWriteAction = Partial<Record<'Put' | 'Update' | 'Delete' | 'ConditionCheck', ItemRef>>;
type WriteRequest = { PutRequest?: { Item?: Record<string, unknown> }; DeleteRequest?: { Key?: Record<string, unknown> } };

const ONGOING = 'Transaction is ongoing for the item';
const KEY_NAMES = [TABLE_DEF.partitionKey, TABLE_DEF.sortKey];

/**
 * One item: its table and its key attributes (of a Put's whole item, only the key's), as the wire
 * carries them (`{"S": …}`): at the SDK's `finalizeRequest` step the document client's input is
 * already marshalled, so the raw client and the document client name an item alike.
 */
function itemId(ref: ItemRef | undefined): string | null {
  const attrs = ref?.Key ?? ref?.Item;
  if (!ref?.TableName || !attrs) return null;
  return [ref.TableName, ...KEY_NAMES.map((k) => `${k}=${JSON.stringify(attrs[k])}`)].join('\u0000');
}

/** The items a request writes (or, for TransactGetItems, reads), one per action, in order. */
function itemsOf(command: string, input: unknown): (string | null)[] {
  const i = (input ?? {}) as ItemRef & { TransactItems?: unknown[]; RequestItems?: Record<string, WriteRequest[]> };
  switch (command) {
    case 'PutItemCommand':
    case 'UpdateItemCommand':
    case 'DeleteItemCommand':
      return [itemId(i)];
    case 'BatchWriteItemCommand':
      return Object.entries(i.RequestItems ?? {}).flatMap(([TableName, requests]) =>
        requests.map((r) => itemId({ TableName, Key: r.DeleteRequest?.Key, Item: r.PutRequest?.Item })),
      );
    case 'TransactWriteItemsCommand':
      return ((i.TransactItems ?? []) as TransactWriteAction[]).map((a) => itemId(a.Put ?? a.Update ?? a.Delete ?? a.ConditionCheck));
    case 'TransactGetItemsCommand':
      return ((i.TransactItems ?? []) as { Get?: ItemRef }[]).map((a) => itemId(a.Get));
    default:
      return [];
  }
}

/** Items held by TransactWriteItems attempts in flight (a count each). */
const transacting = new Map<string, number>();
/** Items held by plain writes in flight (PutItem, UpdateItem, DeleteItem, BatchWriteItem). */
const writing = new Map<string, number>();

async function holding<T>(held: Map<string, number>, ids: (string | null)[], send: () => Promise<T>): Promise<T> {
  const own = ids.filter((id): id is string => id !== null);
  for (const id of own) held.set(id, (held.get(id) ?? 0) + 1);
  try {
    return await send();
  } finally {
    for (const id of own) {
      const n = held.get(id)! - 1;
      if (n > 0) held.set(id, n);
      else held.delete(id);
    }
  }
}

/** What the SDK's deserializer puts in `$metadata` (its retry strategy adds `attempts` and `totalRetryDelay`). */
const metadata = () => ({ httpStatusCode: 400, requestId: randomUUID(), extendedRequestId: undefined, cfId: undefined });

/** As the SDK's deserializer leaves a DynamoDB error: `__type`, no `Message` (now `message`), the response hidden. */
function answered<E extends ServiceException>(error: E, body: Record<string, unknown>): E {
  const type = `com.amazonaws.dynamodb.v20120810#${error.name}`;
  decorateServiceException(error, { __type: type });
  const response = new HttpResponse({
    statusCode: 400,
    headers: { 'content-type': 'application/x-amz-json-1.0', 'x-amzn-requestid': error.$metadata.requestId ?? '' },
    body: JSON.stringify({ __type: type, ...body }),
  });
  Object.defineProperty(error, '$response', { value: response, enumerable: false, writable: false, configurable: false });
  return error;
}

/** DynamoDB's answer to a PutItem, UpdateItem or DeleteItem of an item an ongoing transaction holds. */
export function transactionConflict(): TransactionConflictException {
  return answered(new TransactionConflictException({ message: ONGOING, $metadata: metadata() }), { message: ONGOING });
}

/** DynamoDB's cancellation of a transaction whose actions at `conflicts` met an ongoing one. */
export function transactionCanceled(conflicts: boolean[]): TransactionCanceledException {
  const reasons: CancellationReason[] = conflicts.map((c) => (c ? { Code: 'TransactionConflict', Message: ONGOING } : { Code: 'None' }));
  const message = `Transaction cancelled, please refer cancellation reasons for specific reasons [${reasons.map((r) => r.Code).join(', ')}]`;
  return answered(new TransactionCanceledException({ message, CancellationReasons: reasons, $metadata: metadata() }), { CancellationReasons: reasons, Message: message });
}

/**
 * Which of `ids` a held item meets. DynamoDB decides on its side, the moment the request arrives;
 * here the process decides, and it may not yet have taken in an answer already waiting on its
 * socket (a busy event loop: every handler shares this one process, and a backoff timer fires
 * before the sockets are read). So a request that would meet a held item first lets the process
 * take in what has arrived (one turn of the event loop) and decides then: a transaction that
 * DynamoDB Local has answered no longer holds its items, as on DynamoDB once it has committed.
 */
async function meets(ids: (string | null)[], held: Map<string, number>[]): Promise<boolean[]> {
  const met = () => ids.map((id) => id !== null && held.some((h) => h.has(id)));
  if (!met().some(Boolean)) return met();
  await new Promise((r) => setImmediate(r));
  return met();
}

/** The wrap of every SDK call's attempt: DynamoDB's conflicts, answered here; anything else sent. */
export async function conflictsOf<T>(client: string, command: string, input: unknown, send: () => Promise<T>): Promise<T> {
  if (client !== 'DynamoDBClient') return send();
  const ids = itemsOf(command, input);
  switch (command) {
    case 'PutItemCommand':
    case 'UpdateItemCommand':
    case 'DeleteItemCommand':
      if ((await meets(ids, [transacting]))[0]) throw transactionConflict();
      return holding(writing, ids, send);
    case 'BatchWriteItemCommand':
      return holding(writing, ids, send);
    case 'TransactWriteItemsCommand': {
      const conflicts = await meets(ids, [transacting]);
      if (conflicts.some(Boolean)) throw transactionCanceled(conflicts);
      return holding(transacting, ids, send);
    }
    case 'TransactGetItemsCommand': {
      const conflicts = await meets(ids, [transacting, writing]);
      if (conflicts.some(Boolean)) throw transactionCanceled(conflicts);
      return send();
    }
    default:
      return send();
  }
}

/** Items held right now (tests). */
export const heldItems = (): { transacting: number; writing: number } => ({ transacting: transacting.size, writing: writing.size });

setLocalAttemptWrap(conflictsOf);
