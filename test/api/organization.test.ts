/** Organization settings (D34, D52), phone verification (D7, D43, D57), audit events (D39), worker signup (D9). */
import { startTestRuntime, type TestRuntime, indexesCaughtUp } from '../support/harness';
import { signupBuyer, createKey, idemKey, randomPhone, uniqueEmail, type TestBuyer } from '../support/buyers';
import { clock } from '../../shared/clock';
import { beforeFirstTransaction } from '../support/transaction-conflicts';
import { localOutbox, setSmsProvider } from '../../shared/sms';

let rt: TestRuntime;
let a: TestBuyer;

beforeAll(async () => {
  process.env.LOCAL_FIXED_OTP = '123456';
  rt = await startTestRuntime();
  a = await signupBuyer(rt);
});
afterAll(() => rt.stop());
afterEach(() => clock.reset());

const post = (path: string, key: string, body?: unknown) => rt.request('POST', path, { key, body, headers: { 'Idempotency-Key': idemKey() } });

describe('organization settings (D34, D52)', () => {
  test('GET answers the defaults of D52; updated_at is the creation time until the first change (D59)', async () => {
    const org = await signupBuyer(rt);
    const r = await rt.request('GET', '/v1/organization/settings', { key: org.live });
    expect(r.status).toBe(200);
    expect(r.json).toEqual({
      object: 'organization_settings',
      organization_id: org.orgId,
      auto_top_up_enabled: false,
      auto_top_up_threshold_cents: 1000,
      auto_top_up_amount_cents: 5000,
      updated_at: expect.stringMatching(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/),
    });
  });

  test('two PATCHes racing each keep their change: the later one merges into what the first wrote', async () => {
    const org = await signupBuyer(rt);
    const patch = (body: object) => rt.request('PATCH', '/v1/organization/settings', { key: org.live, body });
    // The second PATCH reads and commits between the first one's read and its commit.
    const other = beforeFirstTransaction(
      (input) => JSON.stringify(input).includes(`"auto_top_up_amount_cents":20000`),
      () => patch({ auto_top_up_enabled: true }),
    );
    try {
      expect((await patch({ auto_top_up_amount_cents: 20000 })).status).toBe(200);
    } finally {
      other.remove();
    }
    expect(other.fired()).toBe(true);
    expect((await rt.request('GET', '/v1/organization/settings', { key: org.live })).json).toMatchObject({ auto_top_up_enabled: true, auto_top_up_amount_cents: 20000 });
  });

  test('PATCH changes only the given fields and is seen by either environment (D3)', async () => {
    const org = await signupBuyer(rt);
    const r = await rt.request('PATCH', '/v1/organization/settings', { key: org.live, body: { auto_top_up_threshold_cents: 2500 } });
    expect(r.status).toBe(200);
    expect(r.json).toMatchObject({ auto_top_up_threshold_cents: 2500, auto_top_up_amount_cents: 5000, auto_top_up_enabled: false });
    const seen = await rt.request('GET', '/v1/organization/settings', { key: org.test });
    expect(seen.json.auto_top_up_threshold_cents).toBe(2500);
  });

  test.each([
    ['auto_top_up_threshold_cents', -1],
    ['auto_top_up_threshold_cents', 1_000_001],
    ['auto_top_up_amount_cents', 999],
    ['auto_top_up_amount_cents', 100_001],
    ['auto_top_up_amount_cents', 1500.5],
    ['auto_top_up_enabled', 'yes'],
  ])('PATCH rejects %s = %p with the field named (D52)', async (field, value) => {
    const r = await rt.request('PATCH', '/v1/organization/settings', { key: a.live, body: { [field]: value } });
    expect(r.status).toBe(400);
    expect(r.json.error.details[0].field).toBe(field);
  });

  test('PATCH needs no Idempotency-Key', async () => {
    const r = await rt.request('PATCH', '/v1/organization/settings', { key: a.live, body: { auto_top_up_enabled: true } });
    expect(r.status).toBe(200);
  });
});

describe('phone verification (D7, D43, D57)', () => {
  test('start answers 202 pending and sends a code by SMS', async () => {
    const org = await signupBuyer(rt);
    const phone = randomPhone();
    const r = await post('/v1/auth/phone_verification', org.live, { phone });
    expect(r.status).toBe(202);
    expect(r.json).toMatchObject({ object: 'phone_verification', phone, status: 'pending', expires_at: expect.any(String) });
    expect(localOutbox.some((m) => m.phone === phone && m.text.includes('123456'))).toBe(true);
  });

  test('an SMS that cannot be sent is 503 with nothing stored; a retry with the same Idempotency-Key sends the code', async () => {
    const org = await signupBuyer(rt);
    const phone = randomPhone();
    const headers = { 'Idempotency-Key': idemKey() };
    setSmsProvider({
      send: async () => {
        throw new Error('SNS: Throttling');
      },
    });
    let failed;
    try {
      failed = await rt.request('POST', '/v1/auth/phone_verification', { key: org.live, body: { phone }, headers });
    } finally {
      setSmsProvider(null);
    }
    expect(failed.status).toBe(503);
    expect(failed.json.error.details[0].code).toBe('sms_unavailable');
    const audit = await rt.request('GET', '/v1/audit-events', { key: org.live });
    expect(audit.json.data.map((e: { event_type: string }) => e.event_type)).not.toContain('phone_verification.started');

    const retry = await rt.request('POST', '/v1/auth/phone_verification', { key: org.live, body: { phone }, headers });
    expect(retry.status).toBe(202);
    expect(localOutbox.some((m) => m.phone === phone)).toBe(true);
  });

  test('a phone number that is not E.164 is 400 naming phone', async () => {
    const r = await post('/v1/auth/phone_verification', a.live, { phone: '555-1234' });
    expect(r.status).toBe(400);
    expect(r.json.error.details[0].field).toBe('phone');
  });

  test('a wrong code is 400 validation_error on code; five wrong codes lock the attempt', async () => {
    const org = await signupBuyer(rt);
    const phone = randomPhone();
    await post('/v1/auth/phone_verification', org.live, { phone });
    for (let i = 0; i < 5; i++) {
      const r = await post('/v1/auth/phone_verification/confirm', org.live, { phone, code: '000000' });
      expect([r.status, r.json.error.details[0].field]).toEqual([400, 'code']);
    }
    const locked = await post('/v1/auth/phone_verification/confirm', org.live, { phone, code: '123456' });
    expect(locked.status).toBe(400);
    expect(locked.json.error.details[0].code).toBe('verification_locked');
  });

  test('the right code grants 250 live cents once; the test balance stays 0', async () => {
    const org = await signupBuyer(rt);
    const phone = randomPhone();
    await post('/v1/auth/phone_verification', org.live, { phone });
    const ok = await post('/v1/auth/phone_verification/confirm', org.live, { phone, code: '123456' });
    expect(ok.status).toBe(200);
    expect(ok.json).toEqual({ object: 'phone_verification', status: 'verified', credits_granted_cents: 250 });
    const live = await rt.request('GET', '/v1/me', { key: org.live });
    expect(live.headers['x-service-credits-remaining']).toBe('250');
    const test = await rt.request('GET', '/v1/me', { key: org.test });
    expect(test.headers['x-service-credits-remaining']).toBe('0');
    const again = await post('/v1/auth/phone_verification', org.live, { phone });
    expect(again.status).toBe(409);
  });

  test('an expired code is refused', async () => {
    const org = await signupBuyer(rt);
    const phone = randomPhone();
    await post('/v1/auth/phone_verification', org.live, { phone });
    clock.advance(11 * 60_000);
    const r = await post('/v1/auth/phone_verification/confirm', org.live, { phone, code: '123456' });
    expect(r.status).toBe(400);
    expect(r.json.error.details[0].code).toBe('code_expired');
  });

  test('a phone number already used by another organization is 409 and grants nothing (D57)', async () => {
    const first = await signupBuyer(rt);
    const second = await signupBuyer(rt);
    const phone = randomPhone();
    await post('/v1/auth/phone_verification', first.live, { phone });
    expect((await post('/v1/auth/phone_verification/confirm', first.live, { phone, code: '123456' })).status).toBe(200);
    await post('/v1/auth/phone_verification', second.live, { phone });
    const r = await post('/v1/auth/phone_verification/confirm', second.live, { phone, code: '123456' });
    expect(r.status).toBe(409);
    expect((await rt.request('GET', '/v1/me', { key: second.live })).headers['x-service-credits-remaining']).toBe('0');
  });
});

describe('audit events (D39)', () => {
  test('every key action here writes an audit event with actor, resource and request id', async () => {
    const org = await signupBuyer(rt);
    const created = await post('/v1/api_keys', org.live, { name: 'audited' });
    await post(`/v1/api_keys/${created.json.id}/rotate`, org.live);
    await post(`/v1/api_keys/${created.json.id}/revoke`, org.live);
    await rt.request('PATCH', '/v1/organization/settings', { key: org.live, body: { auto_top_up_enabled: true } });
    const r = await rt.request('GET', '/v1/audit-events?limit=100', { key: org.live });
    expect(r.status).toBe(200);
    const types = r.json.data.map((e: { event_type: string }) => e.event_type);
    expect(types.slice(0, 4)).toEqual(['organization.settings_updated', 'api_key.revoked', 'api_key.rotated', 'api_key.created']);
    const ev = r.json.data.find((e: { event_type: string; resource: { id: string } }) => e.event_type === 'api_key.created' && e.resource.id === created.json.id);
    expect(ev).toMatchObject({
      object: 'audit_event',
      id: expect.stringMatching(/^aud_/),
      actor: { type: 'api_key', id: org.liveKeyId },
      environment: 'live',
      resource: { type: 'api_key', id: created.json.id },
      request_id: created.headers['x-request-id'],
    });
  });

  test('event_type filters the list', async () => {
    const org = await signupBuyer(rt);
    await post('/v1/api_keys', org.live, { name: 'x' });
    await indexesCaughtUp();
    const r = await rt.request('GET', '/v1/audit-events?event_type=api_key.created', { key: org.live });
    expect(r.json.data.length).toBe(3);
    expect(r.json.data.every((e: { event_type: string }) => e.event_type === 'api_key.created')).toBe(true);
  });

  test('audit events are per organization: a test key sees live actions (D3)', async () => {
    const org = await signupBuyer(rt);
    await post('/v1/api_keys', org.live, { name: 'live action' });
    await indexesCaughtUp();
    const r = await rt.request('GET', '/v1/audit-events?event_type=api_key.created', { key: org.test });
    expect(r.json.data.some((e: { data: { name: string } }) => e.data.name === 'live action')).toBe(true);
  });

  test('needs audit:read', async () => {
    const k = await createKey(rt, a.live, { name: 'no audit', scopes: ['jobs:read'] });
    expect((await rt.request('GET', '/v1/audit-events', { key: k.secret })).status).toBe(403);
  });
});

describe('worker signup (D9)', () => {
  test('answers 201 with a worker and a svc_wkr_ token', async () => {
    const r = await rt.request('POST', '/internal/worker/auth/signup', { body: { name: 'Wendy', email: uniqueEmail('worker') } });
    expect(r.status).toBe(201);
    expect(r.json.worker).toMatchObject({ id: expect.stringMatching(/^wkr_[0-9A-Z]{26}$/), name: 'Wendy' });
    expect(r.json.token).toMatch(/^svc_wkr_[0-9A-Za-z]{32}$/);
  });

  test('a worker token is refused on buyer routes (D9)', async () => {
    const r = await rt.request('POST', '/internal/worker/auth/signup', { body: { name: 'W', email: uniqueEmail('worker') } });
    const me = await rt.request('GET', '/v1/me', { key: r.json.token });
    expect(me.status).toBe(401);
  });

  test('a duplicate worker e-mail is 409', async () => {
    const email = uniqueEmail('worker');
    await rt.request('POST', '/internal/worker/auth/signup', { body: { name: 'W', email } });
    const r = await rt.request('POST', '/internal/worker/auth/signup', { body: { name: 'W', email } });
    expect(r.status).toBe(409);
  });
});
