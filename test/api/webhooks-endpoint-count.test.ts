/**
 * The cap of 100 endpoints per environment holds for environments whose endpoints were created
 * before the counter existed: the counter is seeded from the endpoints themselves
 * (shared/webhooks/endpoint-count.ts), not started at zero.
 */
import { BatchWriteCommand, DeleteCommand, GetCommand } from '@aws-sdk/lib-dynamodb';
import { db, tableName } from '../../shared/db/client';
import { keys } from '../../shared/db/keys';
import { newId } from '../../shared/ids';
import { MAX_ENDPOINTS } from '../../shared/webhooks/endpoints';
import { startDevReceiver, type DevReceiver } from '../../shared/webhooks/dev-receiver';
import { idemKey, signupBuyer, type TestBuyer } from '../support/buyers';
import { startTestRuntime, type TestRuntime } from '../support/harness';

let rt: TestRuntime;
let rx: DevReceiver;
beforeAll(async () => {
  rt = await startTestRuntime({ enablePollers: false });
  rx = await startDevReceiver();
});
afterAll(async () => {
  await rx?.close();
  await rt?.stop();
});

const create = (b: TestBuyer, path: string) => rt.request('POST', '/v1/webhook_endpoints', { key: b.live, body: { url: `${rx.url}/${path}`, events: ['*'] }, headers: { 'Idempotency-Key': idemKey() } });
const counter = async (b: TestBuyer) => (await db().send(new GetCommand({ TableName: tableName(), Key: keys.webhookEndpointCount(b.orgId, 'live'), ConsistentRead: true }))).Item?.endpoints;

/** A buyer whose live environment has `n` endpoints and no counter, as before the counter existed. */
async function environmentFromBeforeTheCounter(n: number): Promise<{ buyer: TestBuyer; first: string }> {
  const buyer = await signupBuyer(rt);
  const r = await create(buyer, 'first');
  expect(r.status).toBe(201);
  const item = (await db().send(new GetCommand({ TableName: tableName(), Key: keys.webhookEndpoint(buyer.orgId, 'live', r.json.id) }))).Item!;
  const copies = Array.from({ length: n - 1 }, () => {
    const id = newId('webhookEndpoint');
    return { ...item, ...keys.webhookEndpoint(buyer.orgId, 'live', id), id };
  });
  for (let i = 0; i < copies.length; i += 25) {
    await db().send(new BatchWriteCommand({ RequestItems: { [tableName()]: copies.slice(i, i + 25).map((Item) => ({ PutRequest: { Item } })) } }));
  }
  await db().send(new DeleteCommand({ TableName: tableName(), Key: keys.webhookEndpointCount(buyer.orgId, 'live') }));
  return { buyer, first: r.json.id };
}

describe('the endpoint cap in environments that had endpoints before the counter', () => {
  it(`an environment that already has ${MAX_ENDPOINTS} endpoints cannot add one`, async () => {
    const { buyer } = await environmentFromBeforeTheCounter(MAX_ENDPOINTS);
    const r = await create(buyer, 'one-too-many');
    expect(r.status).toBe(409);
    expect(r.json.error.details).toEqual([expect.objectContaining({ code: 'endpoint_limit_reached' })]);
    expect(await counter(buyer)).toBe(MAX_ENDPOINTS);
  });

  it('a delete counts down from the endpoints there are (never below them), after which one more fits', async () => {
    const { buyer, first } = await environmentFromBeforeTheCounter(MAX_ENDPOINTS);
    expect((await rt.request('DELETE', `/v1/webhook_endpoints/${first}`, { key: buyer.live })).status).toBe(204);
    expect(await counter(buyer)).toBe(MAX_ENDPOINTS - 1);
    expect((await create(buyer, 'fits')).status).toBe(201);
    expect((await create(buyer, 'does-not')).status).toBe(409);
  });

  it('an environment with a few endpoints counts on from them', async () => {
    const { buyer } = await environmentFromBeforeTheCounter(3);
    expect((await create(buyer, 'fourth')).status).toBe(201);
    expect(await counter(buyer)).toBe(4);
  });
});
