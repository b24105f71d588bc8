/**
 * Phone verification cannot be brute-forced (D7): five guesses per code even under concurrency,
 * and a bounded number of codes (starts) per organization per hour.
 */
import { startTestRuntime, type TestRuntime } from '../support/harness';
import { signupBuyer, idemKey, randomPhone } from '../support/buyers';
import { clock, HOUR_MS } from '../../shared/clock';
import { beforeFirstTransaction } from '../support/transaction-conflicts';

let rt: TestRuntime;

beforeAll(async () => {
  process.env.LOCAL_FIXED_OTP = '123456';
  rt = await startTestRuntime();
});
afterAll(() => rt.stop());
afterEach(() => clock.reset());

const post = (path: string, key: string, body?: unknown) => rt.request('POST', path, { key, body, headers: { 'Idempotency-Key': idemKey() } });
const start = (key: string, phone: string) => post('/v1/auth/phone_verification', key, { phone });
const confirm = (key: string, phone: string, code: string) => post('/v1/auth/phone_verification/confirm', key, { phone, code });
const detailCode = (r: { json: { error?: { details?: { code?: string }[] } } }) => r.json.error?.details?.[0]?.code;

describe('guesses per code', () => {
  test('20 concurrent wrong codes make at most 5 guesses; the rest are locked, and then the right code is refused', async () => {
    const org = await signupBuyer(rt);
    const phone = randomPhone();
    expect((await start(org.live, phone)).status).toBe(202);

    const answers = await Promise.all(Array.from({ length: 20 }, () => confirm(org.live, phone, '000000')));
    expect(answers.every((r) => r.status === 400)).toBe(true);
    const codes = answers.map(detailCode);
    const wrong = codes.filter((c) => c === 'invalid_code').length;
    const locked = codes.filter((c) => c === 'verification_locked').length;
    expect(wrong).toBeLessThanOrEqual(5);
    expect(wrong + locked).toBe(20);

    const right = await confirm(org.live, phone, '123456');
    expect([right.status, detailCode(right)]).toEqual([400, 'verification_locked']);
    expect((await rt.request('GET', '/v1/me', { key: org.live })).headers['x-service-credits-remaining']).toBe('0');
  });
});

describe('concurrent confirmations', () => {
  test('the right code sent many times at once verifies once; the others meet a record that is changing and are never a 500', async () => {
    const org = await signupBuyer(rt);
    const phone = randomPhone();
    expect((await start(org.live, phone)).status).toBe(202);
    const answers = await Promise.all(Array.from({ length: 8 }, () => confirm(org.live, phone, '123456')));
    expect(answers.map((r) => r.status).filter((s) => s >= 500)).toEqual([]);
    expect(answers.filter((r) => r.status === 200)).toHaveLength(1);
  });

  test("a confirm that loses to the organization's own concurrent confirm is told the organization is verified, not that the phone is another's", async () => {
    const org = await signupBuyer(rt);
    const phone = randomPhone();
    expect((await start(org.live, phone)).status).toBe(202);
    let winner: { status: number } | undefined;
    // The other confirm commits between this one's checks and its commit.
    const other = beforeFirstTransaction(
      (input) => JSON.stringify(input).includes(org.orgId) && JSON.stringify(input).includes('PHONE#'),
      async () => void (winner = await confirm(org.live, phone, '123456')),
    );
    let loser;
    try {
      loser = await confirm(org.live, phone, '123456');
    } finally {
      other.remove();
    }
    expect(winner?.status).toBe(200);
    expect(loser.status).toBe(409);
    expect(detailCode(loser)).not.toBe('phone_taken');
    expect(loser.json.error.message).toMatch(/organization has already verified/);
  });
});

describe('starts per organization', () => {
  // The limit counts per clock hour: run each test in the middle of one, away from its edges.
  beforeEach(() => {
    const t = Date.now();
    clock.advance(HOUR_MS - (t % HOUR_MS) + HOUR_MS / 2);
  });

  test('a sixth start within the hour is 429 rate_limit_exceeded with Retry-After and grants no more guesses', async () => {
    const org = await signupBuyer(rt);
    const phone = randomPhone();
    for (let i = 0; i < 5; i++) {
      expect((await start(org.live, phone)).status).toBe(202);
      for (let g = 0; g < 5; g++) expect(detailCode(await confirm(org.live, phone, '000000'))).toBe('invalid_code');
    }

    const sixth = await start(org.live, phone);
    expect(sixth.status).toBe(429);
    expect(sixth.json.error.type).toBe('rate_limit_exceeded');
    expect(Number(sixth.headers['retry-after'])).toBeGreaterThan(0);

    const right = await confirm(org.live, phone, '123456');
    expect([right.status, detailCode(right)]).toEqual([400, 'verification_locked']);
  });

  test('the limit is per organization: another organization can still start', async () => {
    const busy = await signupBuyer(rt);
    for (let i = 0; i < 5; i++) await start(busy.live, randomPhone());
    expect((await start(busy.live, randomPhone())).status).toBe(429);

    const other = await signupBuyer(rt);
    expect((await start(other.live, randomPhone())).status).toBe(202);
  });

  test('codes sent to one phone number are bounded across organizations: a sixth organization starting for it within the hour is 429', async () => {
    const phone = randomPhone();
    for (let i = 0; i < 5; i++) expect((await start((await signupBuyer(rt)).live, phone)).status).toBe(202);
    const sixth = await start((await signupBuyer(rt)).live, phone);
    expect([sixth.status, sixth.json.error.type]).toEqual([429, 'rate_limit_exceeded']);
    expect(Number(sixth.headers['retry-after'])).toBeGreaterThan(0);
    // Another number is not affected.
    expect((await start((await signupBuyer(rt)).live, randomPhone())).status).toBe(202);
  });

  test('a 429 is not stored under its Idempotency-Key: the same key retried after the wait is served, not replayed', async () => {
    const org = await signupBuyer(rt);
    for (let i = 0; i < 5; i++) await start(org.live, randomPhone());
    const key = idemKey();
    const again = (phone: string) => rt.request('POST', '/v1/auth/phone_verification', { key: org.live, body: { phone }, headers: { 'Idempotency-Key': key } });
    const phone = randomPhone();
    const refused = await again(phone);
    expect(refused.status).toBe(429);
    clock.advance(HOUR_MS);
    const served = await again(phone);
    expect(served.status).toBe(202);
    expect(served.headers['idempotent-replayed']).toBeUndefined();
  });

  test('starts are allowed again in the next hour', async () => {
    const org = await signupBuyer(rt);
    const phone = randomPhone();
    for (let i = 0; i < 5; i++) await start(org.live, phone);
    expect((await start(org.live, phone)).status).toBe(429);

    clock.advance(HOUR_MS);
    expect((await start(org.live, phone)).status).toBe(202);
    expect((await confirm(org.live, phone, '123456')).status).toBe(200);
  });
});
