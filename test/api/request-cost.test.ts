/**
 * What an API request costs in DynamoDB calls (issue 15): authentication (one strongly consistent
 * GetItem on the secret's hash), then everything else in parallel. Counted with a recorder on the
 * shared DynamoDB client; the runtime runs in this process with its pollers and streams off, so
 * every call recorded between the request and its response is the request's own.
 */
import { UpdateCommand } from '@aws-sdk/lib-dynamodb';
import { startTestRuntime, type TestRuntime } from '../support/harness';
import { recordDynamoCalls, type DynamoCallRecorder } from '../support/dynamo-calls';
import { buyCredits, jobBody, newBuyer, post, type Buyer } from './billing-support';
import { db, tableName } from '../../shared/db/client';
import { keys } from '../../shared/db/keys';
import { sha256hex } from '../../shared/auth/secrets';

let rt: TestRuntime;
let b: Buyer;
let rec: DynamoCallRecorder;
let jobId: string;

const minuteNow = () => Math.floor(Date.now() / 60_000);
/** Forget the secret's last recorded minute, so its next request is the first of a minute. */
const forgetLastUse = (secret: string) =>
  db().send(new UpdateCommand({ TableName: tableName(), Key: keys.secret(sha256hex(secret)), UpdateExpression: 'REMOVE used_minute' }));

beforeAll(async () => {
  process.env.LOCAL_FIXED_OTP = '123456';
  rt = await startTestRuntime({ enablePollers: false, enableStreams: false });
  b = await newBuyer(rt);
  await buyCredits(rt, b.live, 10_000);
  const created = await post(rt, b.live, '/v1/jobs', jobBody());
  expect(created.status).toBe(201);
  jobId = created.json.id;
  rec = recordDynamoCalls();
});
afterAll(async () => {
  rec.stop();
  await rt.stop();
});

async function measured<T>(fn: () => Promise<T>): Promise<T> {
  rec.reset();
  return fn();
}

describe('GET /v1/jobs/{id}', () => {
  test('authentication is one strongly consistent GetItem alone in the first step', async () => {
    const r = await measured(() => rt.request('GET', `/v1/jobs/${jobId}`, { key: b.live }));
    expect(r.status).toBe(200);
    const [first, ...rest] = [...rec.calls].sort((x, y) => x.start - y.start);
    expect(first!.command).toBe('GetItemCommand');
    for (const c of rest) expect(c.start).toBeGreaterThanOrEqual(first!.end);
  });

  test('makes 3 DynamoDB calls in 2 steps: authentication, then counter + one batch of tier, balance and job', async () => {
    await rt.request('GET', `/v1/jobs/${jobId}`, { key: b.live }); // this minute's last-use write is done
    const before = minuteNow();
    const r = await measured(() => rt.request('GET', `/v1/jobs/${jobId}`, { key: b.live }));
    expect(r.status).toBe(200);
    expect(r.json.id).toBe(jobId);
    const commands = rec.calls.filter((c) => !c.lastUsedWrite || minuteNow() !== before).map((c) => c.command);
    expect(commands.sort()).toEqual(['BatchGetItemCommand', 'GetItemCommand', 'UpdateItemCommand']);
    expect(rec.steps()).toBe(2);
  });

  test("the once-a-minute last_used_at write runs in the second step, beside the counter", async () => {
    await forgetLastUse(b.live);
    const r = await measured(() => rt.request('GET', `/v1/jobs/${jobId}`, { key: b.live }));
    expect(r.status).toBe(200);
    expect(rec.calls.map((c) => c.command).sort()).toEqual(['BatchGetItemCommand', 'GetItemCommand', 'TransactWriteItemsCommand', 'UpdateItemCommand']);
    expect(rec.calls.filter((c) => c.lastUsedWrite)).toHaveLength(1);
    expect(rec.steps()).toBe(2);
    const me = await rt.request('GET', '/v1/me', { key: b.live });
    const keysList = await rt.request('GET', '/v1/api_keys?limit=100', { key: b.live });
    const mine = keysList.json.data.find((k: { id: string }) => k.id === me.json.key_id);
    expect(Date.now() - Date.parse(mine.last_used_at)).toBeLessThan(60_000);
  });

  test('the credits header is the balance read in the same request', async () => {
    const credits = await rt.request('GET', '/v1/billing/credits', { key: b.live });
    const r = await rt.request('GET', `/v1/jobs/${jobId}`, { key: b.live });
    expect(r.headers['x-service-credits-remaining']).toBe(String(credits.json.available_cents));
  });

  test("another organization's job is still 404 when read in the batch", async () => {
    const other = await newBuyer(rt, { verified: false });
    const r = await measured(() => rt.request('GET', `/v1/jobs/${jobId}`, { key: other.live }));
    expect(r.status).toBe(404);
    expect(rec.calls.filter((c) => c.command === 'GetItemCommand')).toHaveLength(1); // no second read
  });

  test("the other environment's job is still 404 when read in the batch", async () => {
    const r = await rt.request('GET', `/v1/jobs/${jobId}`, { key: b.test });
    expect(r.status).toBe(404);
  });
});

describe('POST /v1/jobs', () => {
  test('a test-environment creation makes 5 calls: authentication, counter + batch, idempotency lock, one transaction', async () => {
    await rt.request('GET', '/v1/me', { key: b.test });
    const before = minuteNow();
    const r = await measured(() => post(rt, b.test, '/v1/jobs', jobBody()));
    expect(r.status).toBe(201);
    const commands = rec.calls.filter((c) => !c.lastUsedWrite || minuteNow() !== before).map((c) => c.command);
    expect(commands).toHaveLength(5);
  });

  test('a live creation reads organization, settings and balance in one batch beside the lots query', async () => {
    await rt.request('GET', '/v1/me', { key: b.live });
    const before = minuteNow();
    const r = await measured(() => post(rt, b.live, '/v1/jobs', jobBody()));
    expect(r.status).toBe(201);
    const commands = rec.calls.filter((c) => !c.lastUsedWrite || minuteNow() !== before).map((c) => c.command);
    expect(commands.sort()).toEqual([
      'BatchGetItemCommand', // tier + balance (credits header)
      'BatchGetItemCommand', // organization + settings + balance
      'GetItemCommand', // authentication
      'PutItemCommand', // idempotency lock
      'QueryCommand', // credit lots
      'TransactWriteItemsCommand', // job, escrow, event, audit, idempotency record
      'UpdateItemCommand', // rate-limit window
    ]);
  });
});

describe('revocation stays immediate with the batched reads', () => {
  test("a revoked key's very next request is 401 (D6)", async () => {
    const k = await rt.request('POST', '/v1/api_keys', { key: b.live, body: { name: 'short-lived' }, headers: { 'Idempotency-Key': `k-${Date.now()}` } });
    expect((await rt.request('GET', `/v1/jobs/${jobId}`, { key: k.json.secret })).status).toBe(200);
    const revoked = await rt.request('POST', `/v1/api_keys/${k.json.id}/revoke`, { key: b.live, headers: { 'Idempotency-Key': `r-${Date.now()}` } });
    expect(revoked.status).toBe(204);
    expect((await rt.request('GET', `/v1/jobs/${jobId}`, { key: k.json.secret })).status).toBe(401);
  });

});
