/**
 * DynamoDB refuses a plain write (TransactionConflictException) or another transaction
 * (TransactionCanceledException, reason TransactionConflict) that meets an item of a transaction in
 * progress; DynamoDB Local never does. The local runtime emulates it (local/dynamodb-conflicts.ts).
 * Here a transaction is held in flight by a client that keeps its request until the test lets it
 * go, and other calls meet it through the runtime's own clients (shared/db/client.ts).
 */
import * as path from 'node:path';
import { BatchGetItemCommand, DynamoDBClient, PutItemCommand, TransactionCanceledException, TransactionConflictException, TransactWriteItemsCommand } from '@aws-sdk/client-dynamodb';
import { BatchGetCommand, DeleteCommand, DynamoDBDocumentClient, GetCommand, PutCommand, QueryCommand, TransactGetCommand, TransactWriteCommand, UpdateCommand, type TransactWriteCommandInput } from '@aws-sdk/lib-dynamodb';
import * as esbuild from 'esbuild';
import { heldItems } from '../../local/dynamodb-conflicts';
import { config } from '../../shared/config';
import { db, dynamo, localCredentials, tableName } from '../../shared/db/client';
import { Tx } from '../../shared/db/tx';
import { ROUTES, UNKNOWN_ROUTE } from '../../shared/manifest/routes';
import { QUEUES, SCHEDULES } from '../../shared/manifest/wiring';
import { traced } from '../../shared/observability/tracer';
import { startTestRuntime, type TestRuntime } from '../support/harness';

const ONGOING = 'Transaction is ongoing for the item';
let rt: TestRuntime;

beforeAll(async () => {
  rt = await startTestRuntime({ enablePollers: false, enableStreams: false });
});
afterAll(async () => {
  await rt?.stop();
});

type Items = NonNullable<TransactWriteCommandInput['TransactItems']>;
const T = () => tableName();
const key = (pk: string) => ({ PK: pk, SK: 'X' });
const put = (pk: string, extra: Record<string, unknown> = {}): Items[number] => ({ Put: { TableName: T(), Item: { ...key(pk), ...extra } } });
const read = async (pk: string) => (await db().send(new GetCommand({ TableName: T(), Key: key(pk), ConsistentRead: true }))).Item;
const failure = (p: Promise<unknown>) => p.then(() => null, (e: unknown) => e as Error & Record<string, any>);

/**
 * A TransactWriteItems in flight: sent through a traced client of its own (the document client, or
 * the raw one for a raw command) whose request waits, inside the SDK's attempt, until `answer()`
 * lets it go to DynamoDB Local.
 */
async function inFlight(items: Items | TransactWriteItemsCommand) {
  let letGo!: () => void;
  const gate = new Promise<void>((r) => (letGo = r));
  let reached!: () => void;
  const held = new Promise<void>((r) => (reached = r));
  const raw = traced(new DynamoDBClient({ region: config().region, endpoint: config().dynamoEndpoint, credentials: localCredentials, maxAttempts: 1 }));
  raw.middlewareStack.add(
    (next) => async (args) => {
      reached();
      await gate;
      return next(args);
    },
    { step: 'deserialize', name: 'holdTheTransaction' },
  );
  const sent: Promise<unknown> = items instanceof TransactWriteItemsCommand ? raw.send(items) : DynamoDBDocumentClient.from(raw).send(new TransactWriteCommand({ TransactItems: items }));
  sent.catch(() => undefined);
  await held;
  /** Lets the transaction reach DynamoDB Local; resolves with its outcome. */
  const answer = async () => {
    open.delete(answer);
    letGo();
    try {
      return await sent.then(() => 'committed', (e: Error) => e.name);
    } finally {
      raw.destroy();
    }
  };
  open.add(answer);
  return { answer };
}

/** Transactions a test left in flight (it failed before letting them go). */
const open = new Set<() => Promise<string>>();

afterEach(async () => {
  await Promise.all([...open].map((answer) => answer()));
  expect(heldItems()).toEqual({ transacting: 0, writing: 0 });
});

test('a PutItem, UpdateItem or DeleteItem of an item a transaction in flight holds fails with TransactionConflictException, as the SDK raises DynamoDB’s', async () => {
  await db().send(new PutCommand({ TableName: T(), Item: { ...key('C#plain'), n: 1 } }));
  const tx = await inFlight([put('C#plain', { n: 2 }), put('C#plain-other')]);
  const errors = [
    await failure(db().send(new PutCommand({ TableName: T(), Item: { ...key('C#plain'), n: 9 } }))),
    await failure(db().send(new UpdateCommand({ TableName: T(), Key: key('C#plain'), UpdateExpression: 'SET n = :n', ExpressionAttributeValues: { ':n': 9 } }))),
    await failure(db().send(new DeleteCommand({ TableName: T(), Key: key('C#plain') }))),
  ];
  for (const e of errors) {
    expect(e).toBeInstanceOf(TransactionConflictException);
    expect({ name: e!.name, message: e!.message, $fault: e!.$fault, status: e!.$metadata.httpStatusCode, __type: e!.__type }).toEqual({
      name: 'TransactionConflictException',
      message: ONGOING,
      $fault: 'client',
      status: 400,
      __type: 'com.amazonaws.dynamodb.v20120810#TransactionConflictException',
    });
    // Through the SDK's retry strategy (it counts the attempt), which does not retry it: one attempt
    // of the three the runtime's client may make.
    expect(e!.$metadata).toMatchObject({ attempts: 1, totalRetryDelay: 0 });
    expect(typeof e!.$metadata.requestId).toBe('string');
  }
  expect(await tx.answer()).toBe('committed');
  expect(await read('C#plain')).toEqual({ ...key('C#plain'), n: 2 });
});

test('the raw client’s marshalled key and the document client’s native key name the same item', async () => {
  const viaDocument = await inFlight([put('C#forms')]);
  const raw = await failure(dynamo().send(new PutItemCommand({ TableName: T(), Item: { PK: { S: 'C#forms' }, SK: { S: 'X' } } })));
  expect(raw?.name).toBe('TransactionConflictException');
  expect(await viaDocument.answer()).toBe('committed');

  const viaRaw = await inFlight(new TransactWriteItemsCommand({ TransactItems: [{ Put: { TableName: T(), Item: { PK: { S: 'C#forms' }, SK: { S: 'X' } } } }] }));
  const documentWrite = await failure(db().send(new PutCommand({ TableName: T(), Item: key('C#forms') })));
  expect(await viaRaw.answer()).toBe('committed');
  expect(documentWrite?.name).toBe('TransactionConflictException');
});

test('a transaction naming items of a transaction in flight is cancelled: TransactionConflict at those actions, None at the others', async () => {
  const tx = await inFlight([put('C#tx-a'), put('C#tx-b')]);
  const e = await failure(
    db().send(
      new TransactWriteCommand({
        TransactItems: [
          put('C#tx-free'),
          { Update: { TableName: T(), Key: key('C#tx-b'), UpdateExpression: 'SET n = :n', ExpressionAttributeValues: { ':n': 1 } } },
          { Delete: { TableName: T(), Key: key('C#tx-free-2') } },
          { ConditionCheck: { TableName: T(), Key: key('C#tx-a'), ConditionExpression: 'attribute_not_exists(PK)' } },
        ],
      }),
    ),
  );
  expect(e).toBeInstanceOf(TransactionCanceledException);
  expect({ message: e!.message, reasons: e!.CancellationReasons, $fault: e!.$fault, status: e!.$metadata.httpStatusCode, attempts: e!.$metadata.attempts }).toEqual({
    message: 'Transaction cancelled, please refer cancellation reasons for specific reasons [None, TransactionConflict, None, TransactionConflict]',
    reasons: [{ Code: 'None' }, { Code: 'TransactionConflict', Message: ONGOING }, { Code: 'None' }, { Code: 'TransactionConflict', Message: ONGOING }],
    $fault: 'client',
    status: 400,
    attempts: 1,
  });
  expect(await read('C#tx-free')).toBeUndefined(); // cancelled: nothing of it was written
  expect(await tx.answer()).toBe('committed');
});

test('a TransactGetItems naming an item of a transaction in flight is cancelled with TransactionConflict there', async () => {
  const tx = await inFlight([put('C#get')]);
  const e = await failure(db().send(new TransactGetCommand({ TransactItems: [{ Get: { TableName: T(), Key: key('C#get-free') } }, { Get: { TableName: T(), Key: key('C#get') } }] })));
  expect(e?.name).toBe('TransactionCanceledException');
  expect(e!.CancellationReasons).toEqual([{ Code: 'None' }, { Code: 'TransactionConflict', Message: ONGOING }]);
  expect(await tx.answer()).toBe('committed');
});

test('our transactions (Tx.commit) retry a conflict and commit once the transaction in flight has answered', async () => {
  const tx = await inFlight([put('C#retry', { by: 'first' })]);
  const second = new Tx().put('item', { ...key('C#retry'), by: 'second' }).commit();
  await new Promise((r) => setTimeout(r, 100));
  expect(await tx.answer()).toBe('committed');
  await second;
  expect(await read('C#retry')).toEqual({ ...key('C#retry'), by: 'second' });
});

test('a write to another item passes while a transaction is in flight', async () => {
  const tx = await inFlight([put('C#busy')]);
  await db().send(new PutCommand({ TableName: T(), Item: key('C#elsewhere') }));
  await db().send(new PutCommand({ TableName: T(), Item: { PK: 'C#busy', SK: 'Y' } })); // same partition, other item
  await db().send(new TransactWriteCommand({ TransactItems: [put('C#elsewhere-tx')] }));
  expect(await tx.answer()).toBe('committed');
  expect(await read('C#elsewhere')).toEqual(key('C#elsewhere'));
});

test('once the transaction has answered, committed or cancelled, its items are writable', async () => {
  const committed = await inFlight([put('C#after')]);
  expect(await committed.answer()).toBe('committed');
  await db().send(new PutCommand({ TableName: T(), Item: { ...key('C#after'), n: 1 } }));

  const cancelled = await inFlight([{ Put: { TableName: T(), Item: { ...key('C#after'), n: 2 }, ConditionExpression: 'attribute_not_exists(PK)' } }]);
  expect(await cancelled.answer()).toBe('TransactionCanceledException');
  await db().send(new UpdateCommand({ TableName: T(), Key: key('C#after'), UpdateExpression: 'SET n = :n', ExpressionAttributeValues: { ':n': 3 } }));
  expect(await read('C#after')).toEqual({ ...key('C#after'), n: 3 });
});

test('reads (GetItem, Query, BatchGetItem) of its items pass while a transaction is in flight', async () => {
  await db().send(new PutCommand({ TableName: T(), Item: { ...key('C#read'), n: 1 } }));
  const tx = await inFlight([put('C#read', { n: 2 })]);
  expect(await read('C#read')).toEqual({ ...key('C#read'), n: 1 });
  const q = await db().send(new QueryCommand({ TableName: T(), KeyConditionExpression: 'PK = :pk', ExpressionAttributeValues: { ':pk': 'C#read' } }));
  expect(q.Items).toHaveLength(1);
  const b = await db().send(new BatchGetCommand({ RequestItems: { [T()]: { Keys: [key('C#read')] } } }));
  expect(b.Responses?.[T()]).toHaveLength(1);
  const raw = await dynamo().send(new BatchGetItemCommand({ RequestItems: { [T()]: { Keys: [{ PK: { S: 'C#read' }, SK: { S: 'X' } }] } } }));
  expect(raw.Responses?.[T()]).toHaveLength(1);
  expect(await tx.answer()).toBe('committed');
});

test('no deployed bundle carries the emulation: no handler reaches local/', async () => {
  const root = path.resolve(__dirname, '../..');
  const handlers = [...new Set([...ROUTES.map((r) => r.handler), UNKNOWN_ROUTE.handler, ...QUEUES.map((q) => q.consumer), ...SCHEDULES.map((s) => s.handler)])];
  const native = [...ROUTES.flatMap((r) => r.native?.packages ?? []), ...QUEUES.flatMap((q) => q.native?.packages ?? [])];
  const result = await esbuild.build({
    absWorkingDir: root,
    entryPoints: handlers,
    bundle: true,
    write: false,
    metafile: true,
    platform: 'node',
    format: 'esm',
    outdir: '/tmp/dynamodb-conflicts-bundles',
    external: ['@aws-sdk/*', '@smithy/*', '@aws-lambda-powertools/*', ...native],
    logLevel: 'silent',
  });
  const local = Object.keys(result.metafile.inputs).filter((p) => p.startsWith('local/'));
  expect(local).toEqual([]);
  expect(Object.keys(result.metafile.inputs)).toContain('shared/observability/invocation.ts');
}, 120_000);
