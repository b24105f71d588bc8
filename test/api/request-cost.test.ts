/**
 * What an API request costs in DynamoDB calls (issue 15): authentication (one conditional
 * UpdateItem on the secret's lookup item, which also counts the request), then everything else in
 * parallel; for a key this process has authenticated before, everything else starts beside the
 * authentication (one step). Counted with a recorder on the
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
import { setRateLimitOverride } from '../../shared/orgs/rate-tier';

let rt: TestRuntime;
let b: Buyer;
let rec: DynamoCallRecorder;
let jobId: string;

const minuteNow = () => Math.floor(Date.now() / 60_000);
const hourNow = () => Math.floor(Date.now() / 3_600_000);
/** Forget this minute's count on the secret item, so its next request is the first of a minute. */
const forgetThisMinute = async (secret: string) => {
  const t = Math.floor(Date.now() / 1000);
  const name = `rl_m${Math.floor((t % 3600) / 60)}`;
  await db().send(new UpdateCommand({ TableName: tableName(), Key: keys.secret(sha256hex(secret)), UpdateExpression: 'REMOVE #m', ExpressionAttributeNames: { '#m': name } }));
};

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

/**
 * The request's calls, leaving out the two that come once per period rather than per request: the
 * first request of a minute writes last_used_at, and the first of an hour starts the hour on the
 * secret item. Measured again when a period turned during the request.
 */
async function measured<T>(fn: () => Promise<T>, opts: { keepLastUse?: boolean } = {}): Promise<{ result: T; commands: string[] }> {
  for (;;) {
    const [m, h] = [minuteNow(), hourNow()];
    rec.reset();
    const result = await fn();
    if (hourNow() !== h || (!opts.keepLastUse && minuteNow() !== m)) continue;
    return { result, commands: rec.calls.filter((c) => opts.keepLastUse || !c.lastUsedWrite).map((c) => c.command).sort() };
  }
}

describe('GET /v1/jobs/{id}', () => {
  /** A new key of the buyer's organization, which this process has never authenticated. */
  const newKey = async (): Promise<{ id: string; secret: string }> => {
    const r = await post(rt, b.live, '/v1/api_keys', { name: `fresh ${Math.random()}`, scopes: ['jobs:read', 'jobs:write'] });
    expect(r.status).toBe(200);
    return { id: r.json.id, secret: r.json.secret };
  };

  test("a key's first request in this process: the batch waits for the authenticating count", async () => {
    const { result: r } = await measured(async () => {
      const k = await newKey();
      rec.reset();
      return rt.request('GET', `/v1/jobs/${jobId}`, { key: k.secret });
    });
    expect(r.status).toBe(200);
    // A new secret's first request also starts its hour on the secret item (a second conditional
    // write, once an hour): every authenticating write ends before the batch starts.
    const auth = rec.calls.filter((c) => c.command === 'UpdateItemCommand' && !c.lastUsedWrite);
    const batch = rec.calls.find((c) => c.command === 'BatchGetItemCommand')!;
    expect(auth.length).toBeGreaterThanOrEqual(1);
    for (const c of auth) expect(batch.start).toBeGreaterThanOrEqual(c.end);
  });

  test('a key this process authenticated before: 2 DynamoDB calls in 1 step, the batch of balance and job beside the authenticating count', async () => {
    await rt.request('GET', `/v1/jobs/${jobId}`, { key: b.live }); // this minute's last-use write is done
    const { result: r, commands } = await measured(() => rt.request('GET', `/v1/jobs/${jobId}`, { key: b.live }));
    expect(r.status).toBe(200);
    expect(r.json.id).toBe(jobId);
    expect(commands).toEqual(['BatchGetItemCommand', 'UpdateItemCommand']);
    expect(rec.steps()).toBe(1);
  });

  test('the once-a-minute last_used_at write runs after the authenticating count, beside the batch', async () => {
    const { result: r, commands } = await measured(
      async () => {
        await forgetThisMinute(b.live);
        rec.reset();
        return rt.request('GET', `/v1/jobs/${jobId}`, { key: b.live });
      },
      { keepLastUse: true },
    );
    expect(r.status).toBe(200);
    expect(commands).toEqual(['BatchGetItemCommand', 'UpdateItemCommand', 'UpdateItemCommand']);
    const lastUse = rec.calls.filter((c) => c.lastUsedWrite);
    expect(lastUse).toHaveLength(1);
    const count = rec.calls.find((c) => c.command === 'UpdateItemCommand' && !c.lastUsedWrite)!;
    expect(lastUse[0]!.start).toBeGreaterThanOrEqual(count.end); // it needs the minute's count
    expect(rec.steps()).toBeLessThanOrEqual(2);
    const me = await rt.request('GET', '/v1/me', { key: b.live });
    const keysList = await rt.request('GET', '/v1/api_keys?limit=100', { key: b.live });
    const mine = keysList.json.data.find((k: { id: string }) => k.id === me.json.key_id);
    expect(Date.now() - Date.parse(mine.last_used_at)).toBeLessThan(60_000);
  });

  test('D6: a revoked key is refused on its next request although its owner was remembered, and it reads nothing of that owner afterwards', async () => {
    const k = await newKey();
    expect((await rt.request('GET', `/v1/jobs/${jobId}`, { key: k.secret })).status).toBe(200);
    const revoked = await post(rt, b.live, `/v1/api_keys/${k.id}/revoke`, {});
    expect(revoked.status).toBe(204);
    const refused = await rt.request('GET', `/v1/jobs/${jobId}`, { key: k.secret });
    expect(refused.status).toBe(401);
    expect(refused.headers['x-service-credits-remaining']).toBeUndefined();
    expect(JSON.stringify(refused.json)).not.toContain(jobId);
    const { result: again, commands } = await measured(() => rt.request('GET', `/v1/jobs/${jobId}`, { key: k.secret }));
    expect(again.status).toBe(401);
    expect(commands).toEqual(['UpdateItemCommand']); // the refused count only: the owner is forgotten
  });

  test('the credits header is the balance read in the same request', async () => {
    const credits = await rt.request('GET', '/v1/billing/credits', { key: b.live });
    const r = await rt.request('GET', `/v1/jobs/${jobId}`, { key: b.live });
    expect(r.headers['x-service-credits-remaining']).toBe(String(credits.json.available_cents));
  });

  test("another organization's job is still 404 when read in the batch", async () => {
    const other = await newBuyer(rt, { verified: false });
    await rt.request('GET', '/v1/me', { key: other.live });
    const { result: r, commands } = await measured(() => rt.request('GET', `/v1/jobs/${jobId}`, { key: other.live }));
    expect(r.status).toBe(404);
    expect(commands).toEqual(['BatchGetItemCommand', 'UpdateItemCommand']); // no second read
  });

  test("the other environment's job is still 404 when read in the batch", async () => {
    const r = await rt.request('GET', `/v1/jobs/${jobId}`, { key: b.test });
    expect(r.status).toBe(404);
  });
});

describe('GET /v1/billing/credits', () => {
  test('answers from the balance read for the credits header: 2 calls in 2 steps, body and header agree', async () => {
    await rt.request('GET', '/v1/me', { key: b.live });
    const { result: r, commands } = await measured(() => rt.request('GET', '/v1/billing/credits', { key: b.live }));
    expect(r.status).toBe(200);
    expect(commands).toEqual(['BatchGetItemCommand', 'UpdateItemCommand']);
    expect(r.headers['x-service-credits-remaining']).toBe(String(r.json.available_cents));
  });
});

describe('POST /v1/jobs', () => {
  test('a test-environment creation makes 4 calls: authentication with the count, one batch, the idempotency lock, one transaction', async () => {
    await rt.request('GET', '/v1/me', { key: b.test });
    const { result: r, commands } = await measured(() => post(rt, b.test, '/v1/jobs', jobBody()));
    expect(r.status).toBe(201);
    expect(commands).toEqual(['BatchGetItemCommand', 'PutItemCommand', 'TransactWriteItemsCommand', 'UpdateItemCommand']);
  });

  test('a live creation makes 5 calls: its organization, settings, balance and lots are read beside the rate-limit decision', async () => {
    await rt.request('GET', '/v1/me', { key: b.live });
    const { result: r, commands } = await measured(() => post(rt, b.live, '/v1/jobs', jobBody()));
    expect(r.status).toBe(201);
    expect(commands).toEqual([
      'BatchGetItemCommand', // organization (tier, free-tier rule), balance (credits header, escrow), settings (low-balance threshold)
      'PutItemCommand', // idempotency lock
      'QueryCommand', // credit lots, beside the batch
      'TransactWriteItemsCommand', // job, escrow, event, audit, idempotency record
      'UpdateItemCommand', // authentication, counting the request
    ]);
    expect(rec.steps()).toBe(3); // the key authenticated before: the batch and lots beside the count
  });
});

/** The sort keys of the items the request's BatchGetItem calls asked for, in order. */
const batchedItems = (): string[] =>
  rec.calls
    .filter((c) => c.command === 'BatchGetItemCommand')
    .flatMap((c) => Object.values(c.input.RequestItems as Record<string, { Keys: Record<string, unknown>[] }>).flatMap((r) => r.Keys))
    .map((k) => {
      const sk = k.SK as string | { S?: string };
      return String(typeof sk === 'object' ? sk.S : sk);
    });

describe('the rate tier read from the balance (D13)', () => {
  test("a paying organization's GET reads its balance and the job, not the organization, once this process has seen the balance carry the purchase", async () => {
    await rt.request('GET', `/v1/jobs/${jobId}`, { key: b.live });
    const { result: r, commands } = await measured(() => rt.request('GET', `/v1/jobs/${jobId}`, { key: b.live }));
    expect(r.status).toBe(200);
    expect(commands).toEqual(['BatchGetItemCommand', 'UpdateItemCommand']);
    expect(batchedItems()).toEqual(['BALANCE', 'JOB']);
    expect(r.headers['x-ratelimit-limit']).toBe('100'); // standard: the organization has bought credits
  });

  test("a live purchase marks both environments' balances: the organization's test key reads no organization either", async () => {
    await rt.request('GET', '/v1/me', { key: b.test });
    const { result: r } = await measured(() => rt.request('GET', '/v1/me', { key: b.test }));
    expect(r.status).toBe(200);
    expect(batchedItems()).toEqual(['BALANCE']);
    expect(r.headers['x-ratelimit-limit']).toBe('100');
  });

  test('an override set for a paying organization applies on its very next request, and so does its removal', async () => {
    const o = await newBuyer(rt, { purchaseCents: 1_000 });
    await rt.request('GET', '/v1/me', { key: o.live });
    await rt.request('GET', '/v1/me', { key: o.live });
    await setRateLimitOverride(o.orgId, { perMinute: 321, perHour: 4_321 });
    const { result: set } = await measured(() => rt.request('GET', '/v1/me', { key: o.live }));
    expect(batchedItems()).toEqual(['BALANCE']);
    expect(set.headers['x-ratelimit-limit']).toBe('321');
    await setRateLimitOverride(o.orgId, null);
    const { result: cleared } = await measured(() => rt.request('GET', '/v1/me', { key: o.live }));
    expect(batchedItems()).toEqual(['BALANCE']);
    expect(cleared.headers['x-ratelimit-limit']).toBe('100');
  });

  test('a balance without the purchase mark (written before it existed) keeps the organization in the batch', async () => {
    const o = await newBuyer(rt, { purchaseCents: 1_000 });
    await db().send(new UpdateCommand({ TableName: tableName(), Key: keys.balance(o.orgId, 'live'), UpdateExpression: 'REMOVE has_purchased' }));
    await rt.request('GET', '/v1/me', { key: o.live });
    const { result: r } = await measured(() => rt.request('GET', '/v1/me', { key: o.live }));
    expect(batchedItems()).toEqual(['ORG', 'BALANCE']);
    expect(r.headers['x-ratelimit-limit']).toBe('100'); // the organization's tier
  });

  test("a free organization's requests keep reading the organization: its first purchase applies at once", async () => {
    const o = await newBuyer(rt);
    await rt.request('GET', '/v1/me', { key: o.live });
    const { result: free } = await measured(() => rt.request('GET', '/v1/me', { key: o.live }));
    expect(batchedItems()).toEqual(['ORG', 'BALANCE']);
    expect(free.headers['x-ratelimit-limit']).toBe('60');
    await buyCredits(rt, o.live, 1_000);
    expect((await rt.request('GET', '/v1/me', { key: o.live })).headers['x-ratelimit-limit']).toBe('100');
  });

  test('job creation still reads the organization (the free-tier rule, D18)', async () => {
    await rt.request('GET', '/v1/me', { key: b.live });
    const { result: r } = await measured(() => post(rt, b.live, '/v1/jobs', jobBody()));
    expect(r.status).toBe(201);
    expect(batchedItems()).toEqual(['ORG', 'BALANCE', 'SETTINGS']);
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
