/**
 * The web ACL's per-IP rate rules (lib/edges/waf.ts), as the local HTTP front applies them
 * (local/waf-rate.ts): on each signup route 20 requests per address in five minutes (loopback
 * exempt locally, D44), on every route 6000, as a default deployment sets them; past a limit, 429
 * with Retry-After and WAF's fixed body (no request id: the request never reached API Gateway).
 */
import { SIGNUP_PATHS, WAF_RATE_DEFAULTS, WAF_RATE_LIMITED, WAF_RATE_WINDOW_SECONDS } from '../../shared/http/edge';
import { wafRateRules } from '../../local/waf-rate';
import { deployedWafRatePer5Min, deployedWafSignupRatePer5Min } from '../../local/deployed-settings';
import { startTestRuntime, type TestRuntime } from '../support/harness';

const signupPath = SIGNUP_PATHS.find((p) => p === '/v1/auth/signup')!;
const workerSignupPath = SIGNUP_PATHS.find((p) => p.startsWith('/internal/'))!;

describe('the rules', () => {
  const limits = { perIpPer5Min: 12, signupPerIpPer5Min: 3 };
  const clock = () => {
    const c = { t: 1_000_000, now: () => c.t };
    return c;
  };

  test('an address past the signup limit is refused on that signup route, and only there: buyer and worker signups count apart (D44)', () => {
    const c = clock();
    const check = wafRateRules(limits, c.now);
    for (let i = 0; i < 3; i++) expect(check('203.0.113.7', signupPath)).toBeNull();
    expect(check('203.0.113.7', signupPath)).toBe(WAF_RATE_LIMITED);
    for (let i = 0; i < 3; i++) expect(check('203.0.113.7', workerSignupPath)).toBeNull();
    expect(check('203.0.113.7', workerSignupPath)).toBe(WAF_RATE_LIMITED);
    expect(check('203.0.113.7', '/v1/me')).toBeNull();
  });

  test('a loopback address is exempt from the signup rule (D44), not from the rule on every route', () => {
    const check = wafRateRules(limits, clock().now);
    for (const ip of ['127.0.0.1', '::1']) {
      for (let i = 0; i < 6; i++) expect(check(ip, i % 2 ? signupPath : workerSignupPath)).toBeNull();
      for (let i = 0; i < 6; i++) expect(check(ip, '/v1/me')).toBeNull();
      expect(check(ip, signupPath)).toBe(WAF_RATE_LIMITED);
    }
  });

  test('each address has its own count', () => {
    const check = wafRateRules(limits, clock().now);
    for (let i = 0; i < 3; i++) check('203.0.113.7', signupPath);
    expect(check('203.0.113.7', signupPath)).toBe(WAF_RATE_LIMITED);
    expect(check('198.51.100.2', signupPath)).toBeNull();
  });

  test('every route counts toward the address\'s overall limit, the request after it is refused', () => {
    const check = wafRateRules(limits, clock().now);
    for (let i = 0; i < 12; i++) expect(check('203.0.113.7', i % 2 ? '/v1/jobs' : '/no/such/route')).toBeNull();
    expect(check('203.0.113.7', '/v1/me')).toBe(WAF_RATE_LIMITED);
  });

  test('a signup the signup rule refused is not counted again by the overall rule', () => {
    const check = wafRateRules(limits, clock().now);
    for (let i = 0; i < 3 + 20; i++) check('203.0.113.7', signupPath); // 3 let through, 20 refused by the signup rule
    for (let i = 0; i < 12 - 3; i++) expect(check('203.0.113.7', '/v1/me')).toBeNull();
    expect(check('203.0.113.7', '/v1/me')).toBe(WAF_RATE_LIMITED);
  });

  test('requests older than the five-minute window no longer count, and refused ones count while they are in it', () => {
    const c = clock();
    const check = wafRateRules(limits, c.now);
    for (let i = 0; i < 3; i++) check('203.0.113.7', signupPath);
    c.t += 60_000;
    expect(check('203.0.113.7', signupPath)).toBe(WAF_RATE_LIMITED); // refused, and counted
    c.t += WAF_RATE_WINDOW_SECONDS * 1000 - 60_000; // the first three leave the window; the refused one is still in it
    expect(check('203.0.113.7', signupPath)).toBeNull();
    expect(check('203.0.113.7', signupPath)).toBeNull();
    expect(check('203.0.113.7', signupPath)).toBe(WAF_RATE_LIMITED);
  });
});

describe('the limits npm start takes', () => {
  const saved = { all: process.env.LOCAL_WAF_RATE_PER_5MIN, signup: process.env.LOCAL_WAF_SIGNUP_RATE_PER_5MIN };
  afterEach(() => {
    for (const [k, v] of [['LOCAL_WAF_RATE_PER_5MIN', saved.all], ['LOCAL_WAF_SIGNUP_RATE_PER_5MIN', saved.signup]] as const) {
      if (v === undefined) delete process.env[k];
      else process.env[k] = v;
    }
  });

  test('without LOCAL_WAF_* they are cdk.json\'s, else the stack\'s defaults', () => {
    delete process.env.LOCAL_WAF_RATE_PER_5MIN;
    delete process.env.LOCAL_WAF_SIGNUP_RATE_PER_5MIN;
    const context = (require('../../cdk.json') as { context: Record<string, unknown> }).context;
    expect(deployedWafRatePer5Min()).toBe(Number(context.wafRatePer5Min ?? WAF_RATE_DEFAULTS.perIpPer5Min));
    expect(deployedWafSignupRatePer5Min()).toBe(Number(context.wafSignupRatePer5Min ?? WAF_RATE_DEFAULTS.signupPerIpPer5Min));
  });

  test('LOCAL_WAF_* set them', () => {
    process.env.LOCAL_WAF_RATE_PER_5MIN = '700';
    process.env.LOCAL_WAF_SIGNUP_RATE_PER_5MIN = '15';
    expect([deployedWafRatePer5Min(), deployedWafSignupRatePer5Min()]).toEqual([700, 15]);
  });

  test('a limit WAF would not take (not an integer from 10) stops the start with a clear error', () => {
    for (const bad of ['abc', '0', '9', '12.5']) {
      process.env.LOCAL_WAF_SIGNUP_RATE_PER_5MIN = bad;
      expect(() => deployedWafSignupRatePer5Min()).toThrow(/LOCAL_WAF_SIGNUP_RATE_PER_5MIN .*integer from 10/);
    }
  });
});

describe('a runtime started with the deployment\'s signup limit', () => {
  let rt: TestRuntime;
  const perIpPer5Min = WAF_RATE_DEFAULTS.signupPerIpPer5Min + 12;
  beforeAll(async () => {
    // The harness turns the rules off for the other suites; here the signup rule has the stack's
    // default limit, as `npm start` has it, and the rule on every route a low one.
    rt = await startTestRuntime({ wafRateLimits: { perIpPer5Min, signupPerIpPer5Min: WAF_RATE_DEFAULTS.signupPerIpPer5Min } });
  });
  afterAll(() => rt?.stop());

  const signup = (i: number) => rt.request('POST', signupPath, { body: { name: `Buyer ${i}`, email: `waf-${i}-${Date.now()}@example.com` } });

  test(`signups from this machine past ${WAF_RATE_DEFAULTS.signupPerIpPer5Min} within five minutes are not refused (D44); past the limit on every route, 429 with Retry-After and WAF's body`, async () => {
    for (let i = 0; i <= WAF_RATE_DEFAULTS.signupPerIpPer5Min; i++) expect((await signup(i)).status).toBe(201);
    const worker = await rt.request('POST', workerSignupPath, { body: { name: 'Worker', email: `waf-w-${Date.now()}@example.com` } });
    expect(worker.status).toBe(201);
    let sent = WAF_RATE_DEFAULTS.signupPerIpPer5Min + 2;
    while (sent < perIpPer5Min) {
      expect((await rt.request('GET', '/v1/openapi.json')).status).toBe(200);
      sent++;
    }
    const refused = await rt.request('GET', '/v1/openapi.json');
    expect(refused.status).toBe(429);
    expect(refused.headers['retry-after']).toBe(String(WAF_RATE_WINDOW_SECONDS));
    expect(refused.json).toEqual(JSON.parse(WAF_RATE_LIMITED.body));
    expect(refused.headers['x-request-id']).toBeUndefined();
  });
});
