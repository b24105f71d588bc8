/**
 * Authorization matrix of the platform routes (D3, D5, D6, D8, D9, D42): no key, malformed key,
 * unknown key, revoked key, rotated key after 24 h, missing scope, another organization's resource,
 * the other environment's resource.
 */
import { startTestRuntime, waitFor, type TestResponse, type TestRuntime } from '../support/harness';
import { signupBuyer, createKey, idemKey, type TestBuyer } from '../support/buyers';
import { clock, HOUR_MS } from '../../shared/clock';
import { Tx } from '../../shared/db/tx';
import { emit } from '../../shared/outbox';

let rt: TestRuntime;
let a: TestBuyer;
let b: TestBuyer;

beforeAll(async () => {
  rt = await startTestRuntime();
  a = await signupBuyer(rt, 'Org A');
  b = await signupBuyer(rt, 'Org B');
});
afterAll(() => rt.stop());
afterEach(() => clock.reset());

/** Routes of this issue that take a buyer key, with a request that is valid for `a`. */
const routes = [
  { name: 'GET /v1/me', method: 'GET', path: () => '/v1/me' },
  { name: 'GET /v1/api_keys', method: 'GET', path: () => '/v1/api_keys' },
  { name: 'GET /v1/organization/settings', method: 'GET', path: () => '/v1/organization/settings' },
  { name: 'PATCH /v1/organization/settings', method: 'PATCH', path: () => '/v1/organization/settings' },
  { name: 'GET /v1/audit-events', method: 'GET', path: () => '/v1/audit-events' },
  { name: 'GET /v1/webhook_events', method: 'GET', path: () => '/v1/webhook_events' },
  { name: 'POST /v1/api_keys', method: 'POST', path: () => '/v1/api_keys' },
  { name: 'POST /v1/api_keys/{id}/rotate', method: 'POST', path: () => `/v1/api_keys/${a.testKeyId}/rotate` },
  { name: 'POST /v1/api_keys/{id}/revoke', method: 'POST', path: () => `/v1/api_keys/${a.testKeyId}/revoke` },
];

describe.each([
  ['no key', undefined, {}],
  ['a malformed key', undefined, { Authorization: 'Bearer not-a-key' }],
  ['a non-Bearer scheme', undefined, { Authorization: 'Basic abc' }],
  ['an unknown key', 'svc_live_sk_0123456789abcdefghijABCDEFGHIJ01', {}],
  ['a worker token on a buyer route (D9)', 'svc_wkr_0123456789abcdefghijABCDEFGHIJ01', {}],
])('%s answers 401 authentication_error', (_label, key, headers) => {
  test.each(routes.map((r) => [r.name, r] as const))('%s', async (_n, r) => {
    const res = await rt.request(r.method, r.path(), { key, headers: { ...headers, 'Idempotency-Key': idemKey() } });
    expect(res.status).toBe(401);
    expect(res.json.error.type).toBe('authentication_error');
    expect(res.json.error.request_id).toBe(res.headers['x-request-id']);
  });
});

test('a revoked key stops working immediately (D6)', async () => {
  const k = await createKey(rt, a.live, { name: 'to revoke' });
  expect((await rt.request('GET', '/v1/me', { key: k.secret })).status).toBe(200);
  const rev = await rt.request('POST', `/v1/api_keys/${k.id}/revoke`, { key: a.live, headers: { 'Idempotency-Key': idemKey() } });
  expect(rev.status).toBe(204);
  const after = await rt.request('GET', '/v1/me', { key: k.secret });
  expect(after.status).toBe(401);
});

test('a rotated key: the old secret works for 24 hours, then 401 (D6)', async () => {
  const k = await createKey(rt, a.live, { name: 'to rotate' });
  const rot = await rt.request('POST', `/v1/api_keys/${k.id}/rotate`, { key: a.live, headers: { 'Idempotency-Key': idemKey() } });
  expect(rot.status).toBe(200);
  const fresh = rot.json.secret as string;
  expect(fresh).not.toBe(k.secret);
  expect((await rt.request('GET', '/v1/me', { key: k.secret })).status).toBe(200);
  clock.advance(24 * HOUR_MS - 60_000);
  expect((await rt.request('GET', '/v1/me', { key: k.secret })).status).toBe(200);
  clock.advance(61_000);
  expect((await rt.request('GET', '/v1/me', { key: k.secret })).status).toBe(401);
  expect((await rt.request('GET', '/v1/me', { key: fresh })).status).toBe(200);
});

test('a key without the scope gets 403 authorization_error (D42)', async () => {
  const k = await createKey(rt, a.live, { name: 'read only', scopes: ['jobs:read'] });
  for (const path of ['/v1/api_keys', '/v1/audit-events', '/v1/webhook_events']) {
    const res = await rt.request('GET', path, { key: k.secret });
    expect([path, res.status, res.json.error.type]).toEqual([path, 403, 'authorization_error']);
  }
});

test('a key without the scope gets 403 even for an unknown id (D42)', async () => {
  const k = await createKey(rt, a.live, { name: 'no keys scope', scopes: ['jobs:read'] });
  const res = await rt.request('POST', '/v1/api_keys/key_01ARZ3NDEKTSV4RRFFQ69G5FAV/rotate', {
    key: k.secret,
    headers: { 'Idempotency-Key': idemKey() },
  });
  expect(res.status).toBe(403);
});

test('routes that accept any key answer a key with no matching scope (settings, /v1/me)', async () => {
  const k = await createKey(rt, a.live, { name: 'narrow', scopes: ['usage:read'] });
  expect((await rt.request('GET', '/v1/organization/settings', { key: k.secret })).status).toBe(200);
  expect((await rt.request('GET', '/v1/me', { key: k.secret })).status).toBe(200);
});

test("another organization's API key is 404 not_found", async () => {
  const res = await rt.request('POST', `/v1/api_keys/${b.liveKeyId}/rotate`, { key: a.live, headers: { 'Idempotency-Key': idemKey() } });
  expect(res.status).toBe(404);
  expect(res.json.error.type).toBe('not_found');
  const rev = await rt.request('POST', `/v1/api_keys/${b.liveKeyId}/revoke`, { key: a.live, headers: { 'Idempotency-Key': idemKey() } });
  expect(rev.status).toBe(404);
  expect((await rt.request('GET', '/v1/me', { key: b.live })).status).toBe(200);
});

test('a malformed id is 404 not_found (D43)', async () => {
  const res = await rt.request('POST', '/v1/api_keys/not-an-id/rotate', { key: a.live, headers: { 'Idempotency-Key': idemKey() } });
  expect(res.status).toBe(404);
});

test("the other environment's events are invisible (D3)", async () => {
  const tx = new Tx();
  const testEvt = emit(tx, { orgId: a.orgId, env: 'test', type: 'credits.expired', data: { amount_cents: 1 } });
  const liveEvt = emit(tx, { orgId: a.orgId, env: 'live', type: 'credits.expired', data: { amount_cents: 2 } });
  await tx.commit();
  // The list reads an index, and the events' delivery bookkeeping updates them: wait until each is listed in its own environment.
  const ids = (r: TestResponse) => r.json.data.map((e: { id: string }) => e.id) as string[];
  const [live, test] = await waitFor(async () => {
    const both: [TestResponse, TestResponse] = [await rt.request('GET', '/v1/webhook_events', { key: a.live }), await rt.request('GET', '/v1/webhook_events', { key: a.test })];
    return ids(both[0]).includes(liveEvt.id) && ids(both[1]).includes(testEvt.id) ? both : null;
  }, { intervalMs: 1000 }); // within the key's rate limit (D13)
  expect(ids(live)).toContain(liveEvt.id);
  expect(ids(live)).not.toContain(testEvt.id);
  expect(ids(test)).toContain(testEvt.id);
  expect(ids(test)).not.toContain(liveEvt.id);
  const other = await rt.request('GET', '/v1/webhook_events', { key: b.live });
  expect(ids(other)).not.toContain(liveEvt.id);
});

test('GET /v1/me answers with either key (D8)', async () => {
  const live = await rt.request('GET', '/v1/me', { key: a.live });
  expect(live.json).toEqual({ object: 'me', organization_id: a.orgId, key_id: a.liveKeyId, environment: 'live', scopes: expect.any(Array) });
  expect(live.json.scopes).toHaveLength(8);
  const test = await rt.request('GET', '/v1/me', { key: a.test });
  expect(test.json.environment).toBe('test');
  expect(test.json.key_id).toBe(a.testKeyId);
});
