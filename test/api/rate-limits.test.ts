/** Rate limits (D13, D44). */
import { startTestRuntime, type TestRuntime } from '../support/harness';
import { signupBuyer, createKey, type TestBuyer } from '../support/buyers';
import { handler as signupHandler } from '../../functions/auth/signup';
import type { APIGatewayProxyEvent, Context } from 'aws-lambda';

let rt: TestRuntime;
let a: TestBuyer;

beforeAll(async () => {
  rt = await startTestRuntime();
  a = await signupBuyer(rt);
});
afterAll(() => rt.stop());

test('every authenticated response carries the rate-limit and credits headers (D13)', async () => {
  const sent = Date.now() / 1000;
  const r = await rt.request('GET', '/v1/me', { key: a.live });
  expect(Number(r.headers['x-ratelimit-limit'])).toBe(60);
  expect(Number(r.headers['x-ratelimit-remaining'])).toBeGreaterThanOrEqual(0);
  // The end of the window the request was counted in: after the moment it was sent (the answer
  // itself may arrive just past a minute's end).
  expect(Number(r.headers['x-ratelimit-reset'])).toBeGreaterThan(sent);
  expect(r.headers['x-service-credits-remaining']).toBe('0');
});

test('a free-tier key gets 429 rate_limit_exceeded with Retry-After after 60 requests in a minute (D13)', async () => {
  const k = await createKey(rt, a.live, { name: 'burst' });
  let last;
  // A minute boundary can fall inside the burst; 130 requests cross at most one.
  for (let i = 0; i < 130; i++) {
    last = await rt.request('GET', '/v1/me', { key: k.secret });
    if (last.status === 429) break;
  }
  expect(last!.status).toBe(429);
  expect(last!.json.error.type).toBe('rate_limit_exceeded');
  expect(Number(last!.headers['retry-after'])).toBeGreaterThanOrEqual(1);
  expect(last!.headers['x-ratelimit-remaining']).toBe('0');
});

test('a test (sandbox) key has the same limit as a live key and gets the same 429 (D13)', async () => {
  const k = await createKey(rt, a.live, { name: 'sandbox burst', environment: 'test' });
  const first = await rt.request('GET', '/v1/me', { key: k.secret });
  expect(first.json.environment).toBe('test');
  expect(first.headers['x-ratelimit-limit']).toBe('60');
  let last = first;
  for (let i = 0; i < 130 && last.status !== 429; i++) last = await rt.request('GET', '/v1/me', { key: k.secret });
  expect(last.status).toBe(429);
  expect(last.json.error.type).toBe('rate_limit_exceeded');
  expect(Number(last.headers['retry-after'])).toBeGreaterThanOrEqual(1);
});

test('keys of one organization have independent limits (D13)', async () => {
  const k1 = await createKey(rt, a.live, { name: 'k1' });
  const k2 = await createKey(rt, a.live, { name: 'k2' });
  for (let i = 0; i < 5; i++) await rt.request('GET', '/v1/me', { key: k1.secret });
  const r = await rt.request('GET', '/v1/me', { key: k2.secret });
  expect(Number(r.headers['x-ratelimit-remaining'])).toBe(59);
});

function signupEvent(ip: string, email: string): APIGatewayProxyEvent {
  const body = JSON.stringify({ name: 'From afar', email });
  return {
    resource: '/v1/auth/signup',
    path: '/v1/auth/signup',
    httpMethod: 'POST',
    headers: { 'Content-Type': 'application/json' },
    multiValueHeaders: { 'Content-Type': ['application/json'] },
    queryStringParameters: null,
    multiValueQueryStringParameters: null,
    pathParameters: null,
    stageVariables: null,
    body,
    isBase64Encoded: false,
    requestContext: { identity: { sourceIp: ip } } as APIGatewayProxyEvent['requestContext'],
  };
}

test('signup is limited to 10 per hour per source IP; loopback is exempt locally (D13, D44)', async () => {
  const ctx = { getRemainingTimeInMillis: () => 10_000 } as Context;
  const ip = `203.0.113.${Math.floor(Math.random() * 250)}`;
  const statuses: number[] = [];
  for (let i = 0; i < 11; i++) {
    const res = await signupHandler(signupEvent(ip, `far-${ip}-${i}-${Date.now()}@example.test`), ctx);
    statuses.push(res.statusCode);
  }
  expect(statuses.slice(0, 10).every((s) => s === 201)).toBe(true);
  expect(statuses[10]).toBe(429);
  // Loopback (the test client itself) is exempt in the local runtime.
  expect((await rt.request('POST', '/v1/auth/signup', { body: { name: 'L', email: `l-${Date.now()}@example.test` } })).status).toBe(201);
});
