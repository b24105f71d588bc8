/**
 * One-time secrets at rest (issue 11.1) and the scope of anonymous idempotency records (11.2), on the
 * local runtime: every table item is scanned after secrets were created and rotated under
 * Idempotency-Keys; a replay still hands the secret back to the caller who created it, and only to
 * that caller.
 */
import { request as httpRequest } from 'node:http';
import { ScanCommand } from '@aws-sdk/lib-dynamodb';
import { db } from '../../shared/db/client';
import { startTestRuntime, type TestRuntime } from '../support/harness';
import { idemKey, uniqueEmail } from '../support/buyers';

let rt: TestRuntime;
beforeAll(async () => {
  process.env.LOCAL_FIXED_OTP = '123456'; // a live buyer (phone verified) for the upload test
  rt = await startTestRuntime({ enablePollers: false });
});
afterAll(() => rt.stop());

/** A request from another loopback address (127.0.0.2): another caller, as the server sees it. */
function fromOtherAddress(path: string, body: unknown, headers: Record<string, string>): Promise<{ status: number; json: any }> {
  const u = new URL(rt.url + path);
  const data = JSON.stringify(body);
  return new Promise((ok, fail) => {
    const req = httpRequest(
      { host: u.hostname, port: u.port, path: u.pathname, method: 'POST', localAddress: '127.0.0.2', headers: { ...headers, 'Content-Type': 'application/json', 'Content-Length': String(Buffer.byteLength(data)) } },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => ok({ status: res.statusCode ?? 0, json: JSON.parse(Buffer.concat(chunks).toString('utf8') || 'null') }));
      },
    );
    req.on('error', fail);
    req.end(data);
  });
}

async function scanAll(): Promise<string[]> {
  const out: string[] = [];
  let start: Record<string, unknown> | undefined;
  do {
    const page = await db().send(new ScanCommand({ TableName: rt.tableName, ExclusiveStartKey: start, ConsistentRead: true }));
    for (const it of page.Items ?? []) out.push(JSON.stringify(it));
    start = page.LastEvaluatedKey;
  } while (start);
  return out;
}

/** POST twice with one key: both answers must carry the same secret (the replay opens the sealed record). */
async function twice(path: string, body: unknown, key?: string) {
  const headers = { 'Idempotency-Key': idemKey() };
  const first = await rt.request('POST', path, { key, body, headers });
  const again = await rt.request('POST', path, { key, body, headers });
  expect(again.headers['idempotent-replayed']).toBe('true');
  expect(again.json).toEqual(first.json);
  return first;
}

test('no one-time secret is stored in plaintext anywhere in the table, and replays still return it (issue 11.1)', async () => {
  const secrets: string[] = [];
  const signup = await twice('/v1/auth/signup', { name: 'Sealed Co', email: uniqueEmail('sealed') });
  expect(signup.status).toBe(201);
  const live = signup.json.api_key.secret as string;
  secrets.push(live, signup.json.test_api_key.secret);

  const created = await twice('/v1/api_keys', { name: 'ci' }, live);
  expect(created.status).toBe(200);
  secrets.push(created.json.secret);
  const rotated = await twice(`/v1/api_keys/${created.json.id}/rotate`, undefined, live);
  expect(rotated.status).toBe(200);
  secrets.push(rotated.json.secret);

  const endpoint = await twice('/v1/webhook_endpoints', { url: 'http://127.0.0.1:9/hooks', events: ['*'] }, live);
  expect(endpoint.status).toBe(201);
  secrets.push(endpoint.json.secret);
  const rotatedEndpoint = await twice(`/v1/webhook_endpoints/${endpoint.json.id}/rotate_secret`, undefined, live);
  expect(rotatedEndpoint.status).toBe(200);
  secrets.push(rotatedEndpoint.json.secret);

  const worker = await twice('/internal/worker/auth/signup', { name: 'Wendy', email: uniqueEmail('worker') });
  expect(worker.status).toBe(201);
  secrets.push(worker.json.token);

  expect(secrets.every((s) => typeof s === 'string' && s.length >= 32)).toBe(true);
  const items = await scanAll();
  for (const s of secrets) {
    // Neither the secret nor its random part (without the well-known prefix) appears in any item.
    const random = s.replace(/^(svc_(live|test)_sk_|svc_wkr_|whsec_)/, '');
    const leaks = items.filter((i) => i.includes(random));
    expect({ secret: s.slice(0, 12), leaks }).toEqual({ secret: s.slice(0, 12), leaks: [] });
  }
});

describe('anonymous idempotency records are scoped to the caller (issue 11.2)', () => {
  test('a second signup with the same key and body from another address gets no secret', async () => {
    const body = { name: 'First Caller', email: uniqueEmail('first') };
    const headers = { 'Idempotency-Key': idemKey() };
    const first = await rt.request('POST', '/v1/auth/signup', { body, headers });
    expect(first.status).toBe(201);
    const other = await fromOtherAddress('/v1/auth/signup', body, headers);
    expect(other.status).toBe(409);
    expect(other.json.error.details[0].code).toBe('email_taken');
    expect(JSON.stringify(other.json)).not.toContain(first.json.api_key.secret);
    expect(JSON.stringify(other.json)).not.toContain(first.json.test_api_key.secret);
  });

  test('the first caller still gets its replay with the secrets', async () => {
    const body = { name: 'First Caller', email: uniqueEmail('first') };
    const headers = { 'Idempotency-Key': idemKey() };
    const first = await rt.request('POST', '/v1/auth/signup', { body, headers });
    const again = await rt.request('POST', '/v1/auth/signup', { body, headers });
    expect(again.headers['idempotent-replayed']).toBe('true');
    expect(again.json.api_key.secret).toBe(first.json.api_key.secret);
  });

  test('a second worker signup with the same key and body from another address gets no token', async () => {
    const body = { name: 'Wendy', email: uniqueEmail('wk') };
    const headers = { 'Idempotency-Key': idemKey() };
    const first = await rt.request('POST', '/internal/worker/auth/signup', { body, headers });
    expect(first.status).toBe(201);
    const other = await fromOtherAddress('/internal/worker/auth/signup', body, headers);
    expect(other.status).toBe(409);
    expect(JSON.stringify(other.json)).not.toContain(first.json.token);
  });
});

test('a signed download URL handed out under an Idempotency-Key is stored sealed, and the replay still returns it', async () => {
  const { signupBuyer } = await import('../support/buyers');
  const { Tx } = await import('../../shared/db/tx');
  const { keys, gsi } = await import('../../shared/db/keys');
  const { idTime, newId } = await import('../../shared/ids');
  const b = await signupBuyer(rt, 'Sealed URLs');
  const fileId = newId('file');
  const jobId = newId('job');
  const createdAt = idTime(fileId).toISOString();
  const tx = new Tx().put('file', {
    ...keys.file(fileId),
    ...gsi.file(jobId, fileId, createdAt),
    entity: 'file',
    id: fileId,
    org_id: b.orgId,
    environment: 'live',
    job_id: jobId,
    submission_id: newId('submission'),
    object_key: `uploads/sub_x/r1/${fileId}.jpg`,
    original_filename: 'shop.jpg',
    content_type: 'image/jpeg',
    size_bytes: 10,
    ai_star_rating: 4,
    created_at: createdAt,
  });
  await tx.commit();
  const first = await twice(`/v1/files/${fileId}/refresh_url`, undefined, b.live);
  expect(first.status).toBe(200);
  const signature = new URL(first.json.download_url).searchParams.get('Signature')!;
  expect(signature.length).toBeGreaterThan(20);
  expect((await scanAll()).filter((i) => i.includes(signature))).toEqual([]);
});

test('pre-signed upload URLs handed out under an Idempotency-Key are stored sealed, and the replay still returns them', async () => {
  const { accept, createJob, liveBuyer, signupWorker } = await import('../pipeline/support');
  const b = await liveBuyer(rt);
  const job = await createJob(rt, b.live, { files_needed: 1 });
  const w = await signupWorker(rt);
  const sub = await accept(rt, w.token, job.id);
  expect(sub.status).toBe(201);
  const plan = await twice(`/internal/worker/submissions/${sub.json.id}/upload`, { files: [{ filename: 'big.jpg', content_type: 'image/jpeg', size_bytes: 5_000_000 }] }, w.token);
  expect(plan.status).toBe(200);
  const signatures = (plan.json.uploads as { url: string }[]).map((u) => new URL(u.url).searchParams.get('X-Amz-Signature')!);
  expect(signatures).toHaveLength(1);
  expect(signatures[0]!.length).toBeGreaterThan(20);
  expect((await scanAll()).filter((i) => signatures.some((s) => i.includes(s)))).toEqual([]);
});
