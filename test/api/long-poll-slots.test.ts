/**
 * Held long polls are counted per route and per organization (D20; shared/long-poll-slots.ts), so
 * one caller cannot hold every wait and a plain GET of the same route is never held back by them
 * (the deployed route's function has no reserved concurrency to fill). Small caps here: 2 per
 * organization, 3 per route.
 */
import { GetCommand, UpdateCommand } from '@aws-sdk/lib-dynamodb';
import { db, tableName } from '../../shared/db/client';
import { keys } from '../../shared/db/keys';
import { jobBody, newBuyer, post, type Buyer } from './billing-support';
import { startTestRuntime, waitFor, type TestRuntime } from '../support/harness';

let rt: TestRuntime;
beforeAll(async () => {
  process.env.LOCAL_FIXED_OTP = '123456';
  rt = await startTestRuntime({ enablePollers: false, longPollMaxWaits: { total: 3, perOrg: 2 } });
});
afterAll(() => rt?.stop());

const newJob = async (b: Buyer) => (await post(rt, b.test, '/v1/jobs', jobBody({}))).json.id as string;
const waitOn = (b: Buyer, jobId: string, seconds: number) => rt.request('GET', `/v1/jobs/${jobId}`, { key: b.test, headers: { Prefer: `wait=${seconds}` } });
/** Until `count` waits hold their slots of the route (leases that end later than now), as the held requests take them. */
const holding = (count: number) =>
  waitFor(
    async () => {
      const item = (await db().send(new GetCommand({ TableName: tableName(), Key: keys.waitSlots('jobs.get'), ConsistentRead: true }))).Item ?? {};
      return Object.entries(item).filter(([name, end]) => /^w\d+$/.test(name) && Number(end) > Date.now()).length === count;
    },
    { timeoutMs: 15_000, intervalMs: 25, what: `${count} waits holding their slots` },
  );

/** Sets an organization's slots of the route `jobs.get` to end at `endsAt` (ms), as held waits leave them. */
async function holdSlots(orgId: string, endsAt: number, count: number): Promise<void> {
  const names = Object.fromEntries(Array.from({ length: count }, (_, i) => [`#w${i}`, `w${i}`]));
  await db().send(
    new UpdateCommand({
      TableName: tableName(),
      Key: keys.waitSlots('jobs.get', orgId),
      UpdateExpression: `SET ${Object.keys(names).map((n) => `${n} = :end`).join(', ')}`,
      ExpressionAttributeNames: names,
      ExpressionAttributeValues: { ':end': endsAt },
    }),
  );
}

test('an organization holding its share of waits gets 429 with Retry-After for one more, while its plain GET is served and another organization still waits', async () => {
  const a = await newBuyer(rt, { verified: false });
  const other = await newBuyer(rt, { verified: false });
  const [j1, j2, j3] = [await newJob(a), await newJob(a), await newJob(a)];
  const otherJob = await newJob(other);
  const held = [waitOn(a, j1!, 3), waitOn(a, j2!, 3)];
  await holding(2);

  const refused = await waitOn(a, j3!, 3);
  expect(refused.status).toBe(429);
  expect(refused.json.error).toMatchObject({ type: 'rate_limit_exceeded', message: expect.stringContaining('long polls'), details: [expect.objectContaining({ code: 'long_polls_per_org' })] });
  expect(Number(refused.headers['retry-after'])).toBeGreaterThanOrEqual(1);
  expect(Number(refused.headers['retry-after'])).toBeLessThanOrEqual(3);

  const plain = await rt.request('GET', `/v1/jobs/${j3}`, { key: a.test });
  expect([plain.status, plain.json.status]).toEqual([200, 'open']);

  const otherWait = waitOn(other, otherJob, 1);
  expect((await otherWait).headers['preference-applied']).toBe('wait=1');
  expect((await Promise.all(held)).map((r) => [r.status, r.headers['preference-applied']])).toEqual([
    [200, 'wait=3'],
    [200, 'wait=3'],
  ]);
});

test('the route holds at most its total of waits, all organizations together: one more answers 429 long_polls_full with Retry-After', async () => {
  const [a, b] = [await newBuyer(rt, { verified: false }), await newBuyer(rt, { verified: false })];
  const held = [waitOn(a, await newJob(a), 3), waitOn(a, await newJob(a), 3), waitOn(b, await newJob(b), 3)];
  await holding(3);
  const refused = await waitOn(b, await newJob(b), 3);
  expect(refused.status).toBe(429);
  expect(refused.json.error).toMatchObject({ type: 'rate_limit_exceeded', details: [expect.objectContaining({ code: 'long_polls_full' })] });
  expect(Number(refused.headers['retry-after'])).toBeGreaterThanOrEqual(1);
  expect((await Promise.all(held)).map((r) => r.status)).toEqual([200, 200, 200]);
});

test('a wait gives its slot back when it answers, so the next wait is held', async () => {
  const a = await newBuyer(rt, { verified: false });
  const jobs = [await newJob(a), await newJob(a)];
  const first = jobs.map((j) => waitOn(a, j, 10));
  await holding(2);
  expect((await waitOn(a, jobs[0]!, 1)).status).toBe(429);
  await post(rt, a.test, `/v1/jobs/${jobs[0]}/cancel`); // answers the first wait at once
  expect((await first[0]!).json.status).toBe('cancelled');
  const next = await waitOn(a, jobs[1]!, 1);
  expect([next.status, next.headers['preference-applied']]).toEqual([200, 'wait=1']);
  await post(rt, a.test, `/v1/jobs/${jobs[1]}/cancel`);
  expect((await first[1]!).json.status).toBe('cancelled');
});

test('a slot left by a function that stopped mid-wait lapses at its lease end, and holds nothing after', async () => {
  const a = await newBuyer(rt, { verified: false });
  const job = await newJob(a);
  await holdSlots(a.orgId, Date.now() + 60_000, 2);
  expect((await waitOn(a, job, 1)).status).toBe(429);
  await holdSlots(a.orgId, Date.now() - 1, 2);
  const r = await waitOn(a, job, 1);
  expect([r.status, r.headers['preference-applied']]).toEqual([200, 'wait=1']);
});

test('a job already ended answers at once without taking a slot', async () => {
  const a = await newBuyer(rt, { verified: false });
  const job = await newJob(a);
  await post(rt, a.test, `/v1/jobs/${job}/cancel`);
  await holdSlots(a.orgId, Date.now() + 60_000, 2);
  const r = await waitOn(a, job, 5);
  expect([r.status, r.json.status]).toEqual([200, 'cancelled']);
});
