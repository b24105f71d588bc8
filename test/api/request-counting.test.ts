/**
 * Rate limits counted where authentication looks (D13, D6; issue 15): an API key's requests are
 * counted on its secret's lookup item by the same conditional write that authenticates, and a
 * rotation's two live secrets share one count on the key's window item. The limits stay exact.
 */
import { GetCommand } from '@aws-sdk/lib-dynamodb';
import { startTestRuntime, type TestRuntime } from '../support/harness';
import { signupBuyer, createKey, idemKey, type TestBuyer } from '../support/buyers';
import { db, tableName } from '../../shared/db/client';
import { keys } from '../../shared/db/keys';
import { sha256hex, newApiSecret } from '../../shared/auth/secrets';
import { clock, HOUR_MS } from '../../shared/clock';
import { consume } from '../../shared/ratelimit';

let rt: TestRuntime;

beforeAll(async () => {
  rt = await startTestRuntime({ enablePollers: false, enableStreams: false });
});
afterAll(() => rt.stop());
afterEach(() => clock.reset());

/** 20 s into a minute, so a burst never straddles a window boundary. */
const midMinute = (d = new Date()) => new Date(Math.floor(d.getTime() / 60_000) * 60_000 + 20_000);
const secretItem = async (secret: string) =>
  (await db().send(new GetCommand({ TableName: tableName(), Key: keys.secret(sha256hex(secret)), ConsistentRead: true }))).Item;
const me = (secret: string) => rt.request('GET', '/v1/me', { key: secret });
const statuses = (rs: { status: number }[]) => rs.reduce<Record<number, number>>((m, r) => ({ ...m, [r.status]: (m[r.status] ?? 0) + 1 }), {});

async function freshKey(): Promise<{ buyer: TestBuyer; id: string; secret: string }> {
  const buyer = await signupBuyer(rt);
  const k = await createKey(rt, buyer.live, { name: 'counted' });
  return { buyer, id: k.id, secret: k.secret };
}

test('70 requests at once on a free key: exactly 60 pass and 10 get 429 (D13)', async () => {
  const { secret } = await freshKey();
  clock.set(midMinute());
  const rs = await Promise.all(Array.from({ length: 70 }, () => me(secret)));
  expect(statuses(rs)).toEqual({ 200: 60, 429: 10 });
});

test('a request refused with 429 is taken back from the count: the windows count the requests served (D13)', async () => {
  const { secret } = await freshKey();
  const at = midMinute();
  clock.set(at);
  const rs = await Promise.all(Array.from({ length: 70 }, () => me(secret)));
  expect(statuses(rs)).toEqual({ 200: 60, 429: 10 });
  const item = await secretItem(secret);
  const hourStart = Math.floor(at.getTime() / HOUR_MS) * 3600;
  expect(item!.rl_n).toBe(60);
  expect(item![`rl_m${Math.floor((at.getTime() / 1000 - hourStart) / 60)}`]).toBe(60);
});

test('refusals do not spend the hour: a client that keeps knocking after its minute is used up is served in the next minute until the hour is', async () => {
  const principal = `T#knock${Date.now()}`;
  const limits = { perMinute: 2, perHour: 3 };
  // Ten minutes into the hour, so the next minute is still the same hour whenever this runs.
  const at = midMinute(new Date(Math.floor(Date.now() / HOUR_MS) * HOUR_MS + 10 * 60_000));
  clock.set(at);
  const first = [];
  for (let i = 0; i < 6; i++) first.push((await consume(principal, limits)).allowed);
  expect(first).toEqual([true, true, false, false, false, false]);
  clock.set(new Date(at.getTime() + 60_000));
  expect((await consume(principal, limits)).allowed).toBe(true); // the hour's third request
  expect((await consume(principal, limits)).allowed).toBe(false); // the hour is used up
});

test('the request is counted on the secret item: the hour, and the minute it fell in', async () => {
  const { secret } = await freshKey();
  const at = midMinute();
  clock.set(at);
  for (let i = 0; i < 3; i++) await me(secret);
  const item = await secretItem(secret);
  const hourStart = Math.floor(at.getTime() / HOUR_MS) * 3600;
  expect(item!.rl_hour).toBe(hourStart);
  expect(item!.rl_n).toBe(3);
  expect(item![`rl_m${Math.floor((at.getTime() / 1000 - hourStart) / 60)}`]).toBe(3);
});

test("the first request of a new hour starts it afresh and drops the last hour's minutes", async () => {
  const { secret } = await freshKey();
  const at = midMinute();
  clock.set(at);
  for (let i = 0; i < 5; i++) await me(secret);
  clock.set(new Date(at.getTime() + HOUR_MS + 60_000));
  const r = await me(secret);
  expect(r.status).toBe(200);
  expect(r.headers['x-ratelimit-remaining']).toBe('59');
  const item = await secretItem(secret);
  expect(item!.rl_n).toBe(1);
  expect(Object.keys(item!).filter((n) => n.startsWith('rl_m'))).toHaveLength(1);
});

test('an unknown secret is 401 and creates no item', async () => {
  const secret = newApiSecret('live');
  const r = await me(secret);
  expect(r.status).toBe(401);
  expect(await secretItem(secret)).toBeUndefined();
});

test("a revoked key's next request is 401 and its secret item is not recreated (D6)", async () => {
  const { buyer, id, secret } = await freshKey();
  expect((await me(secret)).status).toBe(200);
  const revoked = await rt.request('POST', `/v1/api_keys/${id}/revoke`, { key: buyer.live, headers: { 'Idempotency-Key': idemKey() } });
  expect(revoked.status).toBe(204);
  expect((await me(secret)).status).toBe(401);
  expect(await secretItem(secret)).toBeUndefined();
});

test('requests racing a revoke are each either served or refused, never a 5xx, and none after it', async () => {
  const { buyer, id, secret } = await freshKey();
  const during = Array.from({ length: 20 }, () => me(secret));
  const revoked = await rt.request('POST', `/v1/api_keys/${id}/revoke`, { key: buyer.live, headers: { 'Idempotency-Key': idemKey() } });
  expect(revoked.status).toBe(204);
  for (const r of await Promise.all(during)) expect([200, 401]).toContain(r.status);
  expect((await me(secret)).status).toBe(401);
});

describe('rotation (D6): one limit per key while two secrets work', () => {
  test("the rotation carries the hour's count over, and both secrets share what is left", async () => {
    const { buyer, id, secret: oldSecret } = await freshKey();
    clock.set(midMinute());
    for (let i = 0; i < 40; i++) expect((await me(oldSecret)).status).toBe(200);
    const rot = await rt.request('POST', `/v1/api_keys/${id}/rotate`, { key: buyer.live, headers: { 'Idempotency-Key': idemKey() } });
    expect(rot.status).toBe(200);
    const newSecret: string = rot.json.secret;
    const rs = [];
    for (let i = 0; i < 20; i++) rs.push(await me(i % 2 ? oldSecret : newSecret));
    expect(statuses(rs)).toEqual({ 200: 20 });
    expect((await me(newSecret)).status).toBe(429);
    expect((await me(oldSecret)).status).toBe(429);
  });

  test('concurrent requests on both secrets during the overlap: exactly the limit passes', async () => {
    const { buyer, id, secret: oldSecret } = await freshKey();
    clock.set(midMinute());
    const rot = await rt.request('POST', `/v1/api_keys/${id}/rotate`, { key: buyer.live, headers: { 'Idempotency-Key': idemKey() } });
    const newSecret: string = rot.json.secret;
    const rs = await Promise.all(Array.from({ length: 70 }, (_, i) => me(i % 2 ? oldSecret : newSecret)));
    expect(statuses(rs)).toEqual({ 200: 60, 429: 10 });
  });

  test('a rotation under a stream of requests still commits, and no request is lost from the count', async () => {
    const { buyer, id, secret: oldSecret } = await freshKey();
    clock.set(midMinute());
    const stream = Array.from({ length: 30 }, () => me(oldSecret));
    const rot = await rt.request('POST', `/v1/api_keys/${id}/rotate`, { key: buyer.live, headers: { 'Idempotency-Key': idemKey() } });
    expect(rot.status).toBe(200);
    expect(statuses(await Promise.all(stream))).toEqual({ 200: 30 });
    const rest = [];
    for (let i = 0; i < 31; i++) rest.push(await me(rot.json.secret));
    expect(statuses(rest)).toEqual({ 200: 30, 429: 1 });
  });

  test('after the hour in which the overlap ends, the new secret counts on its own item, afresh', async () => {
    const { buyer, id } = await freshKey();
    const at = midMinute();
    clock.set(at);
    const rot = await rt.request('POST', `/v1/api_keys/${id}/rotate`, { key: buyer.live, headers: { 'Idempotency-Key': idemKey() } });
    const newSecret: string = rot.json.secret;
    for (let i = 0; i < 10; i++) await me(newSecret);
    clock.set(new Date(at.getTime() + 26 * HOUR_MS));
    const r = await me(newSecret);
    expect(r.status).toBe(200);
    expect(r.headers['x-ratelimit-remaining']).toBe('59');
    expect((await secretItem(newSecret))!.rl_n).toBe(1);
  });
});
