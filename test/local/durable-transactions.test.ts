/**
 * "Data persists and survives any stop" (the embedded default): DynamoDB Local keeps a committed
 * TransactWriteItems in memory until its next plain write, so a SIGKILL right after the commit lost
 * it (an upload answered 202 came back `awaiting_upload` after a restart). On a persistent table the
 * local runtime's client follows each transaction with a plain write; this kills DynamoDB Local
 * right after each of several transactions and finds every one after the restart.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { GetCommand, TransactWriteCommand } from '@aws-sdk/lib-dynamodb';
import { ensureTable, localDynamoClient, startDynamoDbLocal, type DynamoDbLocal } from '../../local/dynamodb';
import { db, resetClients } from '../../shared/db/client';
import { resetConfig } from '../../shared/config';

const dbPath = mkdtempSync(join(tmpdir(), 'durable-tx-'));
const TABLE = 'durable-tx-test';
const saved = { ...process.env };
let ddb: DynamoDbLocal | null = null;

async function start(durable: boolean): Promise<void> {
  ddb = await startDynamoDbLocal({ dbPath });
  Object.assign(process.env, {
    DYNAMODB_ENDPOINT: ddb.endpoint,
    TABLE_NAME: TABLE,
    AWS_REGION: 'us-east-1',
    LOCAL_DYNAMODB_DURABLE_TRANSACTIONS: durable ? '1' : '0',
  });
  resetConfig();
  resetClients();
  const admin = localDynamoClient(ddb.endpoint);
  await ensureTable(admin, TABLE);
  admin.destroy();
}

function killDynamo(): Promise<void> {
  const d = ddb!;
  ddb = null;
  const gone = new Promise<void>((r) => d.process.once('exit', () => r()));
  process.kill(d.pid, 'SIGKILL');
  return gone;
}

const commit = (id: string) =>
  db().send(
    new TransactWriteCommand({
      TransactItems: [
        { Put: { TableName: TABLE, Item: { PK: `T#${id}`, SK: 'A' } } },
        { Put: { TableName: TABLE, Item: { PK: `T#${id}`, SK: 'B' } } },
      ],
    }),
  );
const found = async (id: string) => (await db().send(new GetCommand({ TableName: TABLE, Key: { PK: `T#${id}`, SK: 'B' }, ConsistentRead: true }))).Item !== undefined;

afterAll(async () => {
  if (ddb) await killDynamo();
  resetClients();
  process.env = saved;
  resetConfig();
  rmSync(dbPath, { recursive: true, force: true });
});

test('a transaction committed just before DynamoDB Local is killed is there after the restart', async () => {
  const lost: string[] = [];
  for (let round = 0; round < 6; round++) {
    await start(true);
    if (round > 0 && !(await found(`r${round - 1}`))) lost.push(`r${round - 1}`);
    await commit(`r${round}`);
    await killDynamo();
  }
  await start(true);
  if (!(await found('r5'))) lost.push('r5');
  expect(lost).toEqual([]);
}, 180_000);
