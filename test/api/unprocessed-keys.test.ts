/**
 * DynamoDB may answer a BatchGetItem in part, listing the rest in `UnprocessedKeys` (throttling,
 * an internal failure); DynamoDB Local never does. Here the real answer of DynamoDB Local is cut
 * the way DynamoDB cuts it, once, for the keys a test names: every reader must read those keys
 * again, never take them for missing.
 */
import { PutCommand, UpdateCommand } from '@aws-sdk/lib-dynamodb';
import { randomBytes } from 'node:crypto';
import { startTestRuntime, type TestRuntime } from '../support/harness';
import { newBuyer, type Buyer } from './billing-support';
import { db, dynamo, tableName } from '../../shared/db/client';
import { batchGetConsistent, keyId } from '../../shared/db/batch-get';
import { keys, tenant } from '../../shared/db/keys';

type AnyKey = { PK?: unknown; SK?: unknown };
/** A key's PK whether the item is marshalled ({S: …}) or plain, as the middleware sees either. */
const pkOf = (k: AnyKey) => String((k.PK as { S?: string } | undefined)?.S ?? k.PK);

let withhold: ((pk: string) => boolean) | null = null;
let batchCalls = 0;

let rt: TestRuntime;
let b: Buyer;
beforeAll(async () => {
  process.env.LOCAL_FIXED_OTP = '123456';
  rt = await startTestRuntime({ enablePollers: false, enableStreams: false });
  b = await newBuyer(rt);
  dynamo().middlewareStack.add(
    (next, context) => async (args) => {
      const out = await next(args);
      if ((context as { commandName?: string }).commandName !== 'BatchGetItemCommand') return out;
      batchCalls++;
      const cut = withhold;
      if (!cut) return out;
      withhold = null; // once: the next call gets every key
      const o = out.output as { Responses?: Record<string, AnyKey[]>; UnprocessedKeys?: Record<string, { Keys: AnyKey[] }> };
      const items = o.Responses?.[tableName()] ?? [];
      const held = items.filter((it) => cut(pkOf(it)));
      if (held.length) {
        o.Responses![tableName()] = items.filter((it) => !cut(pkOf(it)));
        o.UnprocessedKeys = { [tableName()]: { Keys: held.map((it) => ({ PK: it.PK, SK: it.SK })) } };
      }
      return out;
    },
    { step: 'initialize', name: 'unprocessedKeysOnce' },
  );
});
afterAll(() => rt?.stop());
beforeEach(() => {
  withhold = null;
  batchCalls = 0;
});

test('a batch read gets every key: those DynamoDB leaves unprocessed are read again', async () => {
  const pk = `TEST#${randomBytes(6).toString('hex')}`;
  const wanted = ['A', 'B'].map((sk) => ({ PK: `${pk}-${sk}`, SK: sk }));
  for (const k of wanted) await db().send(new PutCommand({ TableName: tableName(), Item: { ...k, v: k.SK } }));
  withhold = (p) => p === `${pk}-B`;
  const found = await batchGetConsistent(wanted);
  expect(wanted.map((k) => found.get(keyId(k))?.v)).toEqual(['A', 'B']);
  expect(batchCalls).toBe(2);
});

test('the credits header is the true balance when DynamoDB leaves the balance unprocessed', async () => {
  withhold = (p) => p === tenant(b.orgId, 'live');
  const r = await rt.request('GET', '/v1/me', { key: b.live });
  expect(r.status).toBe(200);
  expect(withhold).toBeNull(); // the cut happened
  expect(r.headers['x-service-credits-remaining']).toBe('250');
});

test('the rate limit is the organization\'s own when DynamoDB leaves the organization unprocessed', async () => {
  const own = await newBuyer(rt, { verified: false });
  await db().send(
    new UpdateCommand({ TableName: tableName(), Key: keys.organization(own.orgId), UpdateExpression: 'SET rate_limits = :l', ExpressionAttributeValues: { ':l': { perMinute: 77, perHour: 700 } } }),
  );
  withhold = (p) => p === keys.organization(own.orgId).PK;
  const r = await rt.request('GET', '/v1/me', { key: own.test });
  expect(r.status).toBe(200);
  expect(withhold).toBeNull();
  expect(r.headers['x-ratelimit-limit']).toBe('77');
});
