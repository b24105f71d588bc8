import { newId, isId, idTime, ulidFloor } from '../../shared/ids';
import { encodeCursor, decodeCursor } from '../../shared/cursor';
import { fingerprint } from '../../shared/idempotency';
import { maskSecret, newApiSecret, secretShape, newWorkerToken } from '../../shared/auth/secrets';
import { clock } from '../../shared/clock';
import { ApiError } from '../../shared/errors';
import { resetSecrets } from '../../shared/secrets';
import { ensureLocalSecrets } from '../../local/secrets';

process.env.RUNTIME = 'local';

afterEach(() => clock.reset());

describe('identifiers (D1)', () => {
  test('ids are <prefix>_<26 Crockford base32> and sort by creation time', () => {
    clock.set(new Date('2026-01-01T00:00:00.000Z'));
    const a = newId('job');
    clock.advance(1);
    const b = newId('job');
    expect(isId('job', a)).toBe(true);
    expect(a < b).toBe(true);
    expect(idTime(a).toISOString()).toBe('2026-01-01T00:00:00.000Z');
  });

  test('ids of one instant are all distinct, their random part drawing every character evenly', () => {
    clock.set(new Date('2026-01-01T00:00:00.000Z'));
    const ids = Array.from({ length: 20_000 }, () => newId('job'));
    expect(new Set(ids).size).toBe(ids.length);
    const seen = new Map<string, number>();
    for (const id of ids) for (const c of id.slice(-16)) seen.set(c, (seen.get(c) ?? 0) + 1);
    expect(seen.size).toBe(32);
    const expected = (ids.length * 16) / 32; // 10,000 per character
    for (const n of seen.values()) expect(Math.abs(n - expected)).toBeLessThan(expected * 0.06);
  });

  test('a malformed id is not an id of its kind (D43)', () => {
    expect(isId('job', 'job_123')).toBe(false);
    expect(isId('job', newId('file'))).toBe(false);
  });

  test('ulidFloor bounds ids by creation instant', () => {
    clock.set(new Date('2026-01-01T00:00:01.000Z'));
    const id = newId('job');
    expect(id > ulidFloor('job', new Date('2026-01-01T00:00:00.999Z'))).toBe(true);
    expect(id > ulidFloor('job', new Date('2026-01-01T00:00:01.001Z'))).toBe(false);
  });
});

describe('cursors (D12)', () => {
  // D63: the HMAC key is the `cursor` secret, read from the local secrets file.
  beforeAll(() => {
    process.env.LOCAL_SECRETS_FILE = ensureLocalSecrets(null, { cursor: 'unit-cursor-key' }).file;
    resetSecrets();
  });

  test('a cursor round-trips for the same query', async () => {
    const c = await encodeCursor({ PK: 'a', SK: 'b' }, 'q1');
    expect(await decodeCursor(c, 'q1')).toEqual({ PK: 'a', SK: 'b' });
  });

  test('a modified cursor is refused with validation_error on cursor', async () => {
    const c = await encodeCursor({ PK: 'a', SK: 'b' }, 'q1');
    const forged = Buffer.from(JSON.stringify({ p: { PK: 'x', SK: 'b' }, b: 'q1' })).toString('base64url') + '.' + c.split('.')[1];
    try {
      await decodeCursor(forged, 'q1');
      throw new Error('accepted');
    } catch (e) {
      expect(e).toBeInstanceOf(ApiError);
      expect((e as ApiError).status).toBe(400);
      expect((e as ApiError).details?.[0]?.field).toBe('cursor');
    }
  });

  test('a cursor of another query (tenant or filter) is refused', async () => {
    const c = await encodeCursor({ PK: 'a', SK: 'b' }, 'tenant-1');
    await expect(decodeCursor(c, 'tenant-2')).rejects.toThrow(ApiError);
  });

  test('a cursor signed with another cursor key is refused (the key is the cursor secret)', async () => {
    const c = await encodeCursor({ PK: 'a', SK: 'b' }, 'q1');
    process.env.LOCAL_SECRETS_FILE = ensureLocalSecrets(null, { cursor: 'another-cursor-key' }).file;
    resetSecrets();
    await expect(decodeCursor(c, 'q1')).rejects.toThrow(ApiError);
  });
});

describe('secrets (D5, D9)', () => {
  test('secrets have the documented shape and mask to the last 4', () => {
    const s = newApiSecret('live');
    expect(s).toMatch(/^svc_live_sk_[0-9A-Za-z]{32}$/);
    expect(secretShape(s)).toEqual({ kind: 'api_key', env: 'live' });
    expect(maskSecret(s)).toBe(`svc_live_sk_...${s.slice(-4)}`);
    expect(secretShape(newWorkerToken())).toEqual({ kind: 'worker' });
    expect(secretShape('svc_live_sk_short')).toBeNull();
  });
});

describe('idempotency fingerprint (D11)', () => {
  test('the same JSON with other key order or spacing is the same request', () => {
    expect(fingerprint('POST', '/v1/jobs', '{"a":1,"b":2}')).toBe(fingerprint('POST', '/v1/jobs', '{ "b": 2, "a": 1 }'));
  });
  test('the same multipart form sent with another boundary is the same request; other bytes are another', () => {
    const form = (boundary: string, data: string) =>
      [`--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="p.jpg"\r\nContent-Type: image/jpeg\r\n\r\n${data}\r\n--${boundary}--\r\n`, `multipart/form-data; boundary=${boundary}`] as const;
    const [a, ctA] = form('----curlA1b2', 'JPEGBYTES');
    const [b, ctB] = form('----formdataZ9', 'JPEGBYTES');
    const [c, ctC] = form('----formdataZ9', 'OTHERBYTES');
    const path = '/internal/worker/submissions/sub_1/upload';
    expect(fingerprint('POST', path, a, ctA)).toBe(fingerprint('POST', path, b, ctB));
    expect(fingerprint('POST', path, a, `multipart/form-data; boundary="----curlA1b2"`)).toBe(fingerprint('POST', path, b, ctB));
    expect(fingerprint('POST', path, c, ctC)).not.toBe(fingerprint('POST', path, b, ctB));
  });
  test('another path or body is another request', () => {
    expect(fingerprint('POST', '/v1/jobs', '{"a":1}')).not.toBe(fingerprint('POST', '/v1/jobs', '{"a":2}'));
    expect(fingerprint('POST', '/v1/a', '{}')).not.toBe(fingerprint('POST', '/v1/b', '{}'));
  });
  test('a query string makes another request; its order does not', () => {
    expect(fingerprint('POST', '/v1/jobs', '{}', undefined, { x: '1' })).not.toBe(fingerprint('POST', '/v1/jobs', '{}'));
    expect(fingerprint('POST', '/v1/jobs', '{}', undefined, { a: '1', b: '2' })).toBe(fingerprint('POST', '/v1/jobs', '{}', undefined, { b: '2', a: '1' }));
    expect(fingerprint('POST', '/v1/jobs', '{}', undefined, {})).toBe(fingerprint('POST', '/v1/jobs', '{}'));
  });
});
