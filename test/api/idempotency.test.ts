/** Idempotency-Key (D10, D11, D49). */
import { startTestRuntime, type TestRuntime } from '../support/harness';
import { signupBuyer, idemKey, type TestBuyer } from '../support/buyers';
import { clock, HOUR_MS } from '../../shared/clock';
import { acquire } from '../../shared/idempotency';
import { Tx } from '../../shared/db/tx';
import { ConditionFailed } from '../../shared/errors';
import { db } from '../../shared/db/client';

let rt: TestRuntime;
let a: TestBuyer;

beforeAll(async () => {
  process.env.LOCAL_FIXED_OTP = '123456'; // a live buyer (phone verified) for the worker upload test
  rt = await startTestRuntime();
  a = await signupBuyer(rt);
});
afterAll(() => rt.stop());
afterEach(() => clock.reset());

const countKeys = async (key: string) => (await rt.request('GET', '/v1/api_keys?limit=100', { key })).json.data.length as number;

test('a missing Idempotency-Key on a mutating POST is 400 naming the header (D10)', async () => {
  const r = await rt.request('POST', '/v1/api_keys', { key: a.live, body: { name: 'x' } });
  expect(r.status).toBe(400);
  expect(r.json.error).toMatchObject({ type: 'validation_error', details: [{ field: 'Idempotency-Key' }] });
});

test('an Idempotency-Key longer than 255 characters is 400 (D10)', async () => {
  const r = await rt.request('POST', '/v1/api_keys', { key: a.live, body: { name: 'x' }, headers: { 'Idempotency-Key': 'k'.repeat(256) } });
  expect(r.status).toBe(400);
  expect(r.json.error.details[0].field).toBe('Idempotency-Key');
});

test('the same key and body returns the stored response with the original request id and creates nothing (D11, D49)', async () => {
  const org = await signupBuyer(rt);
  const k = idemKey();
  const first = await rt.request('POST', '/v1/api_keys', { key: org.live, body: { name: 'once' }, headers: { 'Idempotency-Key': k } });
  const again = await rt.request('POST', '/v1/api_keys', { key: org.live, body: { name: 'once' }, headers: { 'Idempotency-Key': k } });
  expect(again.status).toBe(first.status);
  expect(again.json).toEqual(first.json);
  expect(again.headers['idempotent-replayed']).toBe('true');
  expect(again.headers['x-request-id']).toBe(first.headers['x-request-id']);
  expect(await countKeys(org.live)).toBe(3);
});

test('the same key with a different body is 409 idempotency_conflict (D11)', async () => {
  const k = idemKey();
  await rt.request('POST', '/v1/api_keys', { key: a.live, body: { name: 'one' }, headers: { 'Idempotency-Key': k } });
  const r = await rt.request('POST', '/v1/api_keys', { key: a.live, body: { name: 'two' }, headers: { 'Idempotency-Key': k } });
  expect(r.status).toBe(409);
  expect(r.json.error.type).toBe('idempotency_conflict');
});

test('the same key on another path is 409 idempotency_conflict (D11)', async () => {
  const k = idemKey();
  await rt.request('POST', '/v1/api_keys', { key: a.live, body: { name: 'one' }, headers: { 'Idempotency-Key': k } });
  const r = await rt.request('POST', `/v1/api_keys/${a.testKeyId}/rotate`, { key: a.live, headers: { 'Idempotency-Key': k } });
  expect(r.status).toBe(409);
  expect(r.json.error.type).toBe('idempotency_conflict');
});

test('the same key with another query string is 409 idempotency_conflict, never the other request\'s stored answer (D11)', async () => {
  const k = idemKey();
  const refused = await rt.request('POST', '/v1/api_keys?x=1', { key: a.live, body: { name: 'q' }, headers: { 'Idempotency-Key': k } });
  expect(refused.status).toBe(400);
  const r = await rt.request('POST', '/v1/api_keys', { key: a.live, body: { name: 'q' }, headers: { 'Idempotency-Key': k } });
  expect(r.status).toBe(409);
  expect(r.json.error.type).toBe('idempotency_conflict');
});

test('keys are scoped per organization and environment (D10)', async () => {
  const k = idemKey();
  const live = await rt.request('POST', '/v1/api_keys', { key: a.live, body: { name: 'scoped' }, headers: { 'Idempotency-Key': k } });
  const test = await rt.request('POST', '/v1/api_keys', { key: a.test, body: { name: 'scoped' }, headers: { 'Idempotency-Key': k } });
  expect(live.status).toBe(200);
  expect(test.status).toBe(200);
  expect(test.json.id).not.toBe(live.json.id);
});

test('10 concurrent requests with one Idempotency-Key produce one effect (D11)', async () => {
  const org = await signupBuyer(rt);
  const k = idemKey();
  const results = await Promise.all(
    Array.from({ length: 10 }, () =>
      rt.request('POST', '/v1/api_keys', { key: org.live, body: { name: 'concurrent' }, headers: { 'Idempotency-Key': k } }),
    ),
  );
  const ok = results.filter((r) => r.status === 200);
  const busy = results.filter((r) => r.status === 409);
  expect(ok.length + busy.length).toBe(10);
  expect(new Set(ok.map((r) => r.json.id)).size).toBe(1);
  for (const r of busy) {
    expect(r.json.error.details[0].code).toBe('idempotency_key_in_use');
    expect(r.headers['retry-after']).toBe('1');
  }
  expect(await countKeys(org.live)).toBe(3);
  // After the first finished, the key replays the one response.
  const replay = await rt.request('POST', '/v1/api_keys', { key: org.live, body: { name: 'concurrent' }, headers: { 'Idempotency-Key': k } });
  expect(replay.json.id).toBe(ok[0]!.json.id);
});

test('a 4xx outcome is stored and replayed (D11)', async () => {
  const org = await signupBuyer(rt);
  const rev = await rt.request('POST', `/v1/api_keys/${org.testKeyId}/revoke`, { key: org.live, headers: { 'Idempotency-Key': idemKey() } });
  expect(rev.status).toBe(204);
  const k = idemKey();
  const first = await rt.request('POST', `/v1/api_keys/${org.testKeyId}/rotate`, { key: org.live, headers: { 'Idempotency-Key': k } });
  expect(first.status).toBe(409);
  const again = await rt.request('POST', `/v1/api_keys/${org.testKeyId}/rotate`, { key: org.live, headers: { 'Idempotency-Key': k } });
  expect(again.status).toBe(409);
  expect(again.headers['idempotent-replayed']).toBe('true');
  expect(again.json.error.request_id).toBe(first.json.error.request_id);
});

test('a key can be reused after 24 hours (D11)', async () => {
  const org = await signupBuyer(rt);
  const k = idemKey();
  const first = await rt.request('POST', '/v1/api_keys', { key: org.live, body: { name: 'day' }, headers: { 'Idempotency-Key': k } });
  clock.advance(24 * HOUR_MS + 1000);
  const later = await rt.request('POST', '/v1/api_keys', { key: org.live, body: { name: 'other body' }, headers: { 'Idempotency-Key': k } });
  expect(later.status).toBe(200);
  expect(later.json.id).not.toBe(first.json.id);
});

test('signup honours an Idempotency-Key when sent (D10)', async () => {
  const k = idemKey();
  const body = { name: 'Twice', email: `twice-${Date.now()}@example.test` };
  const first = await rt.request('POST', '/v1/auth/signup', { body, headers: { 'Idempotency-Key': k } });
  const again = await rt.request('POST', '/v1/auth/signup', { body, headers: { 'Idempotency-Key': k } });
  expect(first.status).toBe(201);
  expect(again.status).toBe(201);
  expect(again.json.organization.id).toBe(first.json.organization.id);
  expect(again.headers['idempotent-replayed']).toBe('true');
});

describe('a body refused by validation is an outcome like any other 4xx (D11)', () => {
  test('the second identical POST /v1/jobs with a too-short description replays the stored 400', async () => {
    const k = idemKey();
    const body = { type: 'data_collection', description: 'x', files_needed: 10, accepted_formats: ['image/jpeg'], price_per_file_cents: 20 };
    const first = await rt.request('POST', '/v1/jobs', { key: a.live, body, headers: { 'Idempotency-Key': k } });
    const again = await rt.request('POST', '/v1/jobs', { key: a.live, body, headers: { 'Idempotency-Key': k } });
    expect(first.status).toBe(400);
    expect(first.json.error.type).toBe('validation_error');
    expect(again.status).toBe(400);
    expect(again.headers['idempotent-replayed']).toBe('true');
    expect(again.json).toEqual(first.json);
    expect(again.headers['x-request-id']).toBe(first.headers['x-request-id']);
  });

  test('malformed JSON under a key is stored too, and the key then refuses another body', async () => {
    const k = idemKey();
    const first = await rt.request('POST', '/v1/api_keys', { key: a.live, body: '{"name":', headers: { 'Idempotency-Key': k, 'Content-Type': 'application/json' } });
    const again = await rt.request('POST', '/v1/api_keys', { key: a.live, body: '{"name":', headers: { 'Idempotency-Key': k, 'Content-Type': 'application/json' } });
    const other = await rt.request('POST', '/v1/api_keys', { key: a.live, body: { name: 'fine' }, headers: { 'Idempotency-Key': k } });
    expect([first.status, first.json.error.type]).toEqual([400, 'invalid_request']);
    expect([again.status, again.headers['idempotent-replayed']]).toEqual([400, 'true']);
    expect(other.status).toBe(409);
    expect(other.json.error.type).toBe('idempotency_conflict');
  });

  test('without a key the refused body is still a plain 400 naming the field', async () => {
    const r = await rt.request('POST', '/v1/auth/signup', { body: { name: 'No email' } });
    expect(r.status).toBe(400);
    expect(r.json.error.details.map((d: { field: string }) => d.field)).toContain('email');
  });
});

describe('the response recorded in a transaction counts only once that transaction commits', () => {
  const acquired = async () => {
    const r = await acquire({ scope: `org_idem${Date.now()}#test`, key: idemKey(), fingerprint: 'f', requestId: 'req_x', successStatus: 200 });
    if (r.kind !== 'acquired') throw new Error(`expected a fresh key, got ${r.kind}`);
    return r.handle;
  };

  test('a transaction that fails leaves the response unrecorded, so the middleware still stores what the request answers', async () => {
    const handle = await acquired();
    const tx = new Tx();
    handle.record(tx, { ok: true });
    tx.check('missing', { PK: 'NOPE#idem', SK: 'NOPE' }, { condition: 'attribute_exists(PK)' });
    await expect(tx.commit()).rejects.toBeInstanceOf(ConditionFailed);
    expect(handle.recorded).toBe(false);
  });

  test('D11: when no sealing key can be had (KMS refused or throttled), the key is left free for the retry, not locked', async () => {
    const scope = `org_idem${Date.now()}#test`;
    const key = idemKey();
    const failing = { prepare: async () => Promise.reject(new Error('KMS throttled')) } as never;
    await expect(acquire({ scope, key, fingerprint: 'f', requestId: 'req_a', successStatus: 200, sealer: failing })).rejects.toThrow(/KMS throttled/);
    expect((await acquire({ scope, key, fingerprint: 'f', requestId: 'req_b', successStatus: 200 })).kind).toBe('acquired');
  });

  test('a retry that meets the first request committing (DynamoDB answers TransactionConflictException to its lock) is told the key is in use, never a 500', async () => {
    const scope = `org_idem${Date.now()}#test`;
    const key = idemKey();
    expect((await acquire({ scope, key, fingerprint: 'f', requestId: 'req_a', successStatus: 200 })).kind).toBe('acquired');
    // As DynamoDB answers a write to an item that a transaction is committing; DynamoDB Local never does.
    const client = db();
    const spy = jest.spyOn(client, 'send').mockImplementationOnce(async () => {
      throw Object.assign(new Error('Transaction is ongoing for the item'), { name: 'TransactionConflictException', $fault: 'client', $metadata: { httpStatusCode: 400 } });
    });
    try {
      await expect(acquire({ scope, key, fingerprint: 'f', requestId: 'req_b', successStatus: 200 })).rejects.toMatchObject({
        status: 409,
        details: [expect.objectContaining({ code: 'idempotency_key_in_use' })],
      });
      expect(spy).toHaveBeenCalledTimes(2); // the refused lock, then the consistent read of the record
    } finally {
      spy.mockRestore();
    }
  });

  test('a transaction that commits records the response', async () => {
    const handle = await acquired();
    const tx = new Tx();
    handle.record(tx, { ok: true });
    await tx.commit();
    expect(handle.recorded).toBe(true);
  });
});

test('D11/D45: a worker\'s upload resent with the same Idempotency-Key gets the stored answer, though the client chose a new multipart boundary', async () => {
  const { accept, createJob, detailedJpeg, liveBuyer, multipart, signupWorker, waitForVerdict } = await import('../pipeline/support');
  const b = await liveBuyer(rt);
  const job = await createJob(rt, b.live, { files_needed: 1 });
  const w = await signupWorker(rt);
  const sub = (await accept(rt, w.token, job.id)).json.id as string;
  const bytes = await detailedJpeg(211);
  const key = idemKey();
  const send = () => {
    const m = multipart([{ filename: 'p.jpg', contentType: 'image/jpeg', data: bytes }]); // a fresh boundary each time
    return rt.request('POST', `/internal/worker/submissions/${sub}/upload`, { key: w.token, body: m.body, headers: { 'Content-Type': m.contentType, 'Idempotency-Key': key } });
  };
  const first = await send();
  expect(first.status).toBe(202);
  const again = await send();
  expect([again.status, again.headers['idempotent-replayed']]).toEqual([202, 'true']);
  expect(again.json).toEqual(first.json);
  await waitForVerdict(rt, w.token, sub); // the pipeline's work ends before the runtime stops
});
