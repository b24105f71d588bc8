/** API keys (D5, D6, D43) and list pagination (D12). */
import { startTestRuntime, type TestRuntime, indexesCaughtUp } from '../support/harness';
import { signupBuyer, createKey, idemKey, type TestBuyer } from '../support/buyers';
import { CURSOR_MAX_CHARS } from '../../shared/http/schemas';

let rt: TestRuntime;
let a: TestBuyer;

beforeAll(async () => {
  rt = await startTestRuntime();
  a = await signupBuyer(rt);
});
afterAll(() => rt.stop());

const post = (path: string, key: string, body?: unknown) =>
  rt.request('POST', path, { key, body, headers: { 'Idempotency-Key': idemKey() } });

test('signup returns an organization with a live and a test key (D7)', async () => {
  const r = await rt.request('POST', '/v1/auth/signup', { body: { name: 'Acme', email: 'Owner@Acme.test' } });
  expect(r.status).toBe(201);
  expect(r.json).toMatchObject({
    object: 'signup',
    organization: { id: expect.stringMatching(/^org_[0-9A-Z]{26}$/), name: 'Acme', email: 'owner@acme.test' },
    api_key: { object: 'api_key', environment: 'live', secret: expect.stringMatching(/^svc_live_sk_[0-9A-Za-z]{32}$/) },
    test_api_key: { object: 'api_key', environment: 'test', secret: expect.stringMatching(/^svc_test_sk_[0-9A-Za-z]{32}$/) },
    starter_credits: { amount_cents: 250, status: 'pending_phone_verification' },
  });
});

test('a duplicate signup e-mail is 409 conflict (D7)', async () => {
  const r = await rt.request('POST', '/v1/auth/signup', { body: { name: 'Again', email: a.email.toUpperCase() } });
  expect(r.status).toBe(409);
  expect(r.json.error.type).toBe('conflict');
});

test('signup fields are validated with the failing field named', async () => {
  const r = await rt.request('POST', '/v1/auth/signup', { body: { name: 'X', email: 'nope' } });
  expect(r.status).toBe(400);
  expect(r.json.error.details[0].field).toBe('email');
});

test('a key created without scopes holds all eight scopes', async () => {
  const r = await post('/v1/api_keys', a.live, { name: 'all' });
  expect(r.status).toBe(200);
  expect(r.json.scopes.sort()).toEqual(
    ['audit:read', 'billing:write', 'jobs:read', 'jobs:write', 'keys:manage', 'usage:read', 'webhooks:read', 'webhooks:write'],
  );
});

test('the key object has the D5 fields and the secret only on create', async () => {
  const r = await post('/v1/api_keys', a.live, { name: 'ci', scopes: ['jobs:read', 'jobs:write'] });
  expect(r.status).toBe(200);
  expect(Object.keys(r.json).sort()).toEqual(
    ['created_at', 'environment', 'id', 'last_used_at', 'name', 'object', 'previous_secret_expires_at', 'revoked_at', 'scopes', 'secret', 'secret_masked'].sort(),
  );
  expect(r.json.secret_masked).toBe(`svc_live_sk_...${r.json.secret.slice(-4)}`);
  const list = await rt.request('GET', '/v1/api_keys?limit=100', { key: a.live });
  const listed = list.json.data.find((k: { id: string }) => k.id === r.json.id);
  expect(listed.secret).toBeUndefined();
  expect(listed.secret_masked).toBe(r.json.secret_masked);
});

test('a new key takes the calling key environment unless environment is given (D43)', async () => {
  expect((await post('/v1/api_keys', a.test, { name: 't' })).json.environment).toBe('test');
  expect((await post('/v1/api_keys', a.test, { name: 'l', environment: 'live' })).json.environment).toBe('live');
});

test('an unknown scope is 400 naming scopes', async () => {
  const r = await post('/v1/api_keys', a.live, { name: 'x', scopes: ['jobs:delete'] });
  expect(r.status).toBe(400);
  expect(r.json.error.details[0].field).toBe('scopes.0');
});

test('an unknown body field is 400 validation_error naming the field (D4)', async () => {
  const r = await post('/v1/api_keys', a.live, { name: 'x', colour: 'red' });
  expect(r.status).toBe(400);
  expect(r.json.error).toMatchObject({ type: 'validation_error', details: [{ field: 'colour' }] });
});

test('malformed JSON is 400 invalid_request (D4)', async () => {
  const r = await rt.request('POST', '/v1/api_keys', {
    key: a.live,
    body: '{"name":',
    headers: { 'Content-Type': 'application/json', 'Idempotency-Key': idemKey() },
  });
  expect(r.status).toBe(400);
  expect(r.json.error.type).toBe('invalid_request');
});

test('rotate answers the key with a new secret and previous_secret_expires_at 24 h ahead (D6)', async () => {
  const k = await createKey(rt, a.live, { name: 'rot' });
  const r = await post(`/v1/api_keys/${k.id}/rotate`, a.live);
  expect(r.status).toBe(200);
  expect(r.json.secret).toMatch(/^svc_live_sk_/);
  expect(r.json.secret).not.toBe(k.secret);
  const overlap = Date.parse(r.json.previous_secret_expires_at) - Date.now();
  expect(overlap).toBeGreaterThan(23.9 * 3600_000);
  expect(overlap).toBeLessThanOrEqual(24 * 3600_000);
});

test('revoke is 204 with no body, permanent, and a revoked key cannot be rotated', async () => {
  const k = await createKey(rt, a.live, { name: 'rev' });
  const r = await post(`/v1/api_keys/${k.id}/revoke`, a.live);
  expect(r.status).toBe(204);
  expect(r.text).toBe('');
  const listed = (await rt.request('GET', '/v1/api_keys?limit=100', { key: a.live })).json.data.find((x: { id: string }) => x.id === k.id);
  expect(listed.revoked_at).not.toBeNull();
  expect((await post(`/v1/api_keys/${k.id}/rotate`, a.live)).status).toBe(409);
});

test('two revokes at once: both 204, one revoked_at and one audit record (D6)', async () => {
  const org = await signupBuyer(rt, 'Double revoke');
  const ids = [];
  for (let i = 0; i < 3; i++) {
    const k = await createKey(rt, org.live, { name: `twice${i}` });
    ids.push(k.id);
    const both = await Promise.all([post(`/v1/api_keys/${k.id}/revoke`, org.live), post(`/v1/api_keys/${k.id}/revoke`, org.live)]);
    expect(both.map((r) => r.status)).toEqual([204, 204]);
  }
  await indexesCaughtUp(); // the audit list filtered by type reads an index
  const audit = (await rt.request('GET', '/v1/audit-events?event_type=api_key.revoked&limit=100', { key: org.live })).json.data as { resource: { id: string } }[];
  for (const id of ids) expect(audit.filter((e) => e.resource.id === id)).toHaveLength(1);
});

test('a list pages newest first with an exact has_more (D12)', async () => {
  const org = await signupBuyer(rt, 'Pager');
  const created = [];
  for (let i = 0; i < 3; i++) created.push((await createKey(rt, org.live, { name: `k${i}` })).id);
  // 2 signup keys + 3 = 5 keys; pages of 2: 2, 2, 1.
  const seen: string[] = [];
  let cursor: string | null = null;
  const pages: { n: number; more: boolean }[] = [];
  do {
    const q: string = cursor ? `?limit=2&cursor=${encodeURIComponent(cursor)}` : '?limit=2';
    const r = await rt.request('GET', `/v1/api_keys${q}`, { key: org.live });
    expect(r.status).toBe(200);
    seen.push(...r.json.data.map((k: { id: string }) => k.id));
    pages.push({ n: r.json.data.length, more: r.json.has_more });
    cursor = r.json.next_cursor;
  } while (cursor);
  expect(pages).toEqual([{ n: 2, more: true }, { n: 2, more: true }, { n: 1, more: false }]);
  expect(seen.slice(0, 3)).toEqual([...created].reverse());
  expect(new Set(seen).size).toBe(5);
});

test('a page that ends exactly at the last item says has_more false', async () => {
  const org = await signupBuyer(rt, 'Exact');
  const r = await rt.request('GET', '/v1/api_keys?limit=2', { key: org.live });
  expect(r.json).toMatchObject({ object: 'list', has_more: false, next_cursor: null });
  expect(r.json.data).toHaveLength(2);
});

test('a tampered cursor is 400 validation_error on cursor (D12)', async () => {
  const first = await rt.request('GET', '/v1/api_keys?limit=1', { key: a.live });
  const c: string = first.json.next_cursor;
  const tampered = c.slice(0, 5) + (c[5] === 'A' ? 'B' : 'A') + c.slice(6);
  const r = await rt.request('GET', `/v1/api_keys?limit=1&cursor=${encodeURIComponent(tampered)}`, { key: a.live });
  expect(r.status).toBe(400);
  expect(r.json.error.details[0].field).toBe('cursor');
});

test("another organization's cursor is refused", async () => {
  const other = await signupBuyer(rt, 'Other');
  const first = await rt.request('GET', '/v1/api_keys?limit=1', { key: other.live });
  const r = await rt.request('GET', `/v1/api_keys?limit=1&cursor=${encodeURIComponent(first.json.next_cursor)}`, { key: a.live });
  expect(r.status).toBe(400);
});

test.each(['0', '101', 'abc'])('limit=%s is 400 naming limit (D12)', async (limit) => {
  const r = await rt.request('GET', `/v1/api_keys?limit=${limit}`, { key: a.live });
  expect(r.status).toBe(400);
  expect(r.json.error.details[0].field).toBe('limit');
});

test('an unknown query parameter is 400 naming it', async () => {
  const r = await rt.request('GET', '/v1/api_keys?colour=red', { key: a.live });
  expect(r.status).toBe(400);
  expect(r.json.error.details[0].field).toBe('colour');
});

test('an unknown route is 404 not_found in the envelope with a request id (D4)', async () => {
  const r = await rt.request('GET', '/v1/nothing-here', { key: a.live });
  expect(r.status).toBe(404);
  expect(r.json.error.type).toBe('not_found');
  expect(r.json.error.request_id).toMatch(/^req_[0-9A-Z]{26}$/);
  // The not-found function's answer (an ANY method deployed), so X-Request-Id is there too.
  expect(r.headers['x-request-id']).toBe(r.json.error.request_id);
});

test('D12: a cursor longer than any the service writes is 400 invalid_cursor, before it is read', async () => {
  const r = await rt.request('GET', `/v1/api_keys?cursor=${'c'.repeat(CURSOR_MAX_CHARS + 1)}`, { key: a.live });
  expect(r.status).toBe(400);
  expect(r.json.error.type).toBe('validation_error');
  expect(r.json.error.details).toEqual([{ field: 'cursor', code: 'invalid_cursor', message: expect.any(String) }]);
});

test('WAF SizeRestrictions_QUERYSTRING: a 2,048-character cursor (once allowed by the schema) is the web ACL\'s 403, as deployed', async () => {
  // `cursor=` and 2,048 characters make a query string over 2,048 bytes: the web ACL blocks it
  // before any function runs. This was a local 400 and a deployed 403.
  const r = await rt.request('GET', `/v1/api_keys?cursor=${'c'.repeat(2048)}`, { key: a.live });
  expect(r.status).toBe(403);
  expect(r.json).toEqual({ error: { type: 'authorization_error', message: 'The request was blocked by the firewall.', request_id: `req_${r.headers['x-amzn-requestid']}` } });
  expect(r.headers['x-request-id']).toBeUndefined();
});

test('every response carries X-Request-Id req_<ULID> (D4)', async () => {
  const r = await rt.request('GET', '/v1/me', { key: a.live });
  expect(r.headers['x-request-id']).toMatch(/^req_[0-9A-Z]{26}$/);
});

test('a JSON body sent as curl -d sends it (form content type) is taken as JSON', async () => {
  const r = await rt.request('POST', '/v1/auth/signup', {
    body: JSON.stringify({ name: 'Curl', email: `curl-${Date.now()}@example.test` }),
    headers: { 'Content-Type': 'application/x-www-form-urlencoded' },
  });
  expect(r.status).toBe(201);
});

test('a malformed body without a key is 401: authentication comes first (D42)', async () => {
  const r = await rt.request('POST', '/v1/api_keys', { body: '{oops', headers: { 'Content-Type': 'application/json' } });
  expect(r.status).toBe(401);
});
