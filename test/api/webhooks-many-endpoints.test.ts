/**
 * An organization with as many endpoints as it may have (100 per environment) gets every event at
 * every endpoint, and no more can be added. The fan-out and the replay read all endpoints without a
 * signed list cursor: the webhooks consumer and the replay route are not granted the `cursor` secret
 * deployed. Here the local secrets file is rewritten without it while they run, so the test sees
 * what they see deployed.
 */
import { copyFileSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomUUID } from 'node:crypto';
import { startTestRuntime, waitFor, type TestRuntime } from '../support/harness';
import { signupBuyer, idemKey, type TestBuyer } from '../support/buyers';
import { startDevReceiver, type DevReceiver } from '../../shared/webhooks/dev-receiver';
import { allEndpoints, createEndpoint, MAX_ENDPOINTS } from '../../shared/webhooks/endpoints';
import { getEvent, type DeliveryEntry } from '../../shared/webhooks/dispatcher';
import { systemContext } from '../../shared/context';
import { getSecret, resetSecrets } from '../../shared/secrets';
import { Tx } from '../../shared/db/tx';
import { emit } from '../../shared/outbox';
import type { BuyerPrincipal } from '../../shared/types';

const ENDPOINTS = MAX_ENDPOINTS;
/**
 * Time allowed for the 100 (or 200) deliveries. Not a performance bar (that is the webhooks
 * benchmark's job). Alone this suite takes about 23 s. Late in a full `npm test` run it took
 * 48–104 s, because each test file's AsyncLocalStorage stores stayed in Node's list after it
 * ended; they are now released at its end (test/support/environment.cjs).
 */
const DELIVERY_BUDGET_MS = 150_000;

let rt: TestRuntime;
let rx: DevReceiver;
let buyer: TestBuyer;
let secretsFile: string;
const backup = join(tmpdir(), `secrets-backup-${randomUUID()}.json`);

beforeAll(async () => {
  rt = await startTestRuntime();
  rx = await startDevReceiver();
  secretsFile = process.env.LOCAL_SECRETS_FILE!;
  copyFileSync(secretsFile, backup);
  buyer = await signupBuyer(rt, 'Many Endpoints Co');
  // Straight through the domain function: 100 API calls would spend the route's rate limit.
  const principal: BuyerPrincipal = { kind: 'api_key', orgId: buyer.orgId, keyId: buyer.liveKeyId, env: 'live', scopes: [], previousSecret: false };
  for (let i = 0; i < ENDPOINTS; i++) await createEndpoint(systemContext('test'), principal, { url: `${rx.url}/ep-${i}`, events: ['*'] });
}, 120_000);
afterEach(() => restoreCursorSecret());
afterAll(async () => {
  await rx?.close();
  await rt?.stop();
  rmSync(backup, { force: true });
});

/** As deployed for the webhooks consumer and the replay route: the cursor secret is not there. */
function withoutCursorSecret(): void {
  const values = JSON.parse(readFileSync(backup, 'utf8')) as Record<string, string>;
  delete values.cursor;
  writeFileSync(secretsFile, JSON.stringify(values), { mode: 0o600 });
  resetSecrets();
}
function restoreCursorSecret(): void {
  copyFileSync(backup, secretsFile);
  resetSecrets();
}

async function newEvent(): Promise<string> {
  const tx = new Tx();
  const id = emit(tx, { orgId: buyer.orgId, env: 'live', type: 'job.completed', data: { job_id: `job_${randomUUID()}` } }).id;
  await tx.commit();
  return id;
}

const reached = (eventId: string) => new Set(rx.received.filter((r) => r.event.id === eventId).map((r) => r.path));

it('every endpoint of an organization with 100 is read without the cursor secret', async () => {
  withoutCursorSecret();
  await expect(getSecret('cursor')).rejects.toThrow(/cursor/); // the setting works
  const all = await allEndpoints(buyer.orgId, 'live');
  expect(all).toHaveLength(ENDPOINTS);
  expect(new Set(all.map((e) => e.id)).size).toBe(ENDPOINTS);
});

it('one event reaches all 100 endpoints of an organization', async () => {
  withoutCursorSecret();
  const id = await newEvent();
  await waitFor(() => reached(id).size === ENDPOINTS, { timeoutMs: 60_000 });
  await waitFor(async () => (await getEvent(id))!.delivery_status === 'delivered', { timeoutMs: 40_000 });
  const deliveries = (await getEvent(id))!.deliveries as Record<string, DeliveryEntry>;
  expect(Object.values(deliveries).filter((d) => d.status === 'delivered')).toHaveLength(ENDPOINTS);
}, DELIVERY_BUDGET_MS);

it('a replay of an event reaches all 100 endpoints again', async () => {
  const id = await newEvent();
  await waitFor(async () => (await getEvent(id))?.delivery_status === 'delivered', { timeoutMs: 60_000 });
  withoutCursorSecret();
  // Per endpoint, how often the event arrived before the replay (once, or more: delivery is at least once).
  const arrivals = () => {
    const n = new Map<string, number>();
    for (const x of rx.received.filter((x) => x.event.id === id)) n.set(x.path, (n.get(x.path) ?? 0) + 1);
    return n;
  };
  const before = arrivals();
  const r = await rt.request('POST', `/v1/webhook_events/${id}/replay`, { key: buyer.live, body: {}, headers: { 'Idempotency-Key': idemKey() } });
  expect(r.status).toBe(202);
  await waitFor(() => {
    const now = arrivals();
    return before.size === ENDPOINTS && [...before].every(([path, n]) => (now.get(path) ?? 0) > n);
  }, { timeoutMs: 60_000, what: 'the replay reaching every endpoint again' });
  expect(reached(id).size).toBe(ENDPOINTS);
}, DELIVERY_BUDGET_MS);

it('an environment with 100 endpoints takes no more (409 endpoint_limit_reached) until one is deleted', async () => {
  const create = () => rt.request('POST', '/v1/webhook_endpoints', { key: buyer.live, body: { url: `${rx.url}/ep-extra`, events: ['*'] }, headers: { 'Idempotency-Key': idemKey() } });
  const refused = await create();
  expect(refused.status).toBe(409);
  expect(refused.json.error.details).toEqual([expect.objectContaining({ code: 'endpoint_limit_reached' })]);
  expect(await allEndpoints(buyer.orgId, 'live')).toHaveLength(ENDPOINTS);
  // The test environment has its own count.
  expect((await rt.request('POST', '/v1/webhook_endpoints', { key: buyer.test, body: { url: `${rx.url}/ep-test`, events: ['*'] }, headers: { 'Idempotency-Key': idemKey() } })).status).toBe(201);
  const [first] = await allEndpoints(buyer.orgId, 'live');
  expect((await rt.request('DELETE', `/v1/webhook_endpoints/${first!.id as string}`, { key: buyer.live })).status).toBe(204);
  expect((await create()).status).toBe(201);
  expect((await create()).status).toBe(409);
});
