/**
 * The stage's method throttling (lib/api.ts), as the local HTTP front applies it
 * (local/stage-throttle.ts): a token bucket per method, `burst` deep, refilled at `ratePerSecond`;
 * a request that finds it empty gets API Gateway's THROTTLED response (429, Retry-After 1, the
 * gateway's request id) and never reaches its function.
 */
import { GATEWAY_RESPONSES, STAGE_THROTTLE, THROTTLED_MESSAGE } from '../../shared/http/edge';
import { stageThrottle } from '../../local/stage-throttle';
import { startTestRuntime, type TestRuntime } from '../support/harness';

describe('the buckets', () => {
  const clock = () => {
    const c = { t: 1_000_000, now: () => c.t };
    return c;
  };

  test(`a method takes a burst of ${STAGE_THROTTLE.burst} at once, and the request after it is throttled`, () => {
    const mayGoOn = stageThrottle(STAGE_THROTTLE, clock().now);
    for (let i = 0; i < STAGE_THROTTLE.burst; i++) expect(mayGoOn('GET /v1/jobs/{job_id}')).toBe(true);
    expect(mayGoOn('GET /v1/jobs/{job_id}')).toBe(false);
  });

  test('each method has its own bucket', () => {
    const mayGoOn = stageThrottle(STAGE_THROTTLE, clock().now);
    for (let i = 0; i < STAGE_THROTTLE.burst; i++) mayGoOn('GET /v1/jobs/{job_id}');
    expect(mayGoOn('GET /v1/jobs/{job_id}')).toBe(false);
    expect(mayGoOn('GET /v1/jobs')).toBe(true);
    expect(mayGoOn('POST /v1/jobs')).toBe(true);
  });

  test(`an empty bucket refills at ${STAGE_THROTTLE.ratePerSecond} a second, up to the burst`, () => {
    const c = clock();
    const mayGoOn = stageThrottle(STAGE_THROTTLE, c.now);
    for (let i = 0; i < STAGE_THROTTLE.burst; i++) mayGoOn('GET /v1/me');
    c.t += 1000 / STAGE_THROTTLE.ratePerSecond; // one token
    expect(mayGoOn('GET /v1/me')).toBe(true);
    expect(mayGoOn('GET /v1/me')).toBe(false);
    c.t += 60_000; // a long pause refills the burst, no more
    for (let i = 0; i < STAGE_THROTTLE.burst; i++) expect(mayGoOn('GET /v1/me')).toBe(true);
    expect(mayGoOn('GET /v1/me')).toBe(false);
  });
});

describe('the local front', () => {
  let rt: TestRuntime;
  beforeAll(async () => {
    // A token every 100 s: the bucket cannot refill while the test runs, however slow the machine
    // (the refill itself is tested on the buckets above).
    rt = await startTestRuntime({ stageThrottle: { ratePerSecond: 0.01, burst: 5 } });
  });
  afterAll(() => rt?.stop());

  test('a request past a method\'s bucket answers API Gateway\'s 429 before its function runs; another method still answers', async () => {
    for (let i = 0; i < 5; i++) expect((await rt.request('GET', '/v1/openapi.json')).status).toBe(200);
    const throttled = await rt.request('GET', '/v1/openapi.json', { contract: false });
    expect(throttled.status).toBe(429);
    expect(throttled.headers['retry-after']).toBe(GATEWAY_RESPONSES.throttled.headers!['Retry-After']);
    expect(throttled.json.error).toEqual({ type: 'rate_limit_exceeded', message: THROTTLED_MESSAGE, request_id: `req_${throttled.headers['x-amzn-requestid']}` });
    expect(throttled.headers['x-request-id']).toBeUndefined();
    expect((await rt.request('GET', '/docs')).status).toBe(200);
  });
});
