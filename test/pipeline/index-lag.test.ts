/**
 * DynamoDB's global secondary indexes are eventually consistent: an index may not yet list an item
 * written a moment ago. The runtime's `indexLagMs` (local/index-lag.ts) leaves such items out of
 * every index read, and a buyer's whole flow must still come out right: nothing that decides money,
 * a verdict, a cancellation or an export may rely on an index being current. Lists may lag, and
 * are polled here as an integrator would.
 */
import { randomUUID } from 'node:crypto';
import { PutCommand, QueryCommand } from '@aws-sdk/lib-dynamodb';
import { db, tableName } from '../../shared/db/client';
import { indexesCaughtUp, waitFor } from '../support/harness';
import { createJob, flowSuite, liveBuyer, waitForVerdict, workersUpload } from './support';

jest.setTimeout(240_000);

const LAG_MS = 1_500;

const flow = flowSuite({ indexLagMs: LAG_MS });
const post = flow.post;
const listed = async (key: string, path: string) => ((await flow.rt.request('GET', path, { key })).json.data as { id: string }[]).map((x) => x.id);

test('an index read leaves out an item written less than the lag before, and lists it once the lag has passed; the table itself shows it at once', async () => {
  const buyer = await liveBuyer(flow.rt);
  const job = await createJob(flow.rt, buyer.live, { files_needed: 1, price_per_file_cents: 10 });
  const written = Date.now();
  expect(await listed(buyer.live, '/v1/jobs?limit=100')).not.toContain(job.id); // the job list is an index (GSI1)
  expect((await flow.rt.request('GET', `/v1/jobs/${job.id}`, { key: buyer.live })).status).toBe(200); // the job item itself
  await new Promise((r) => setTimeout(r, Math.max(0, written + LAG_MS - Date.now())));
  expect(await listed(buyer.live, '/v1/jobs?limit=100')).toContain(job.id);
});

test('an index read that projects no key (only `id`) still leaves out what the index has not taken in, and answers only what it asked for', async () => {
  const pk = `LAGTEST#${randomUUID()}`;
  await db().send(new PutCommand({ TableName: tableName(), Item: { PK: pk, SK: 'A', GSI1PK: pk, GSI1SK: 'A', id: 'a' } }));
  const written = Date.now();
  const query = () =>
    db().send(new QueryCommand({ TableName: tableName(), IndexName: 'GSI1', KeyConditionExpression: 'GSI1PK = :pk', ExpressionAttributeValues: { ':pk': pk }, ProjectionExpression: 'id' }));
  expect((await query()).Items).toEqual([]);
  await new Promise((r) => setTimeout(r, Math.max(0, written + LAG_MS - Date.now())));
  expect((await query()).Items).toEqual([{ id: 'a' }]);
});

test("the tests' indexesCaughtUp waits until a write made during its wait is in the index too", async () => {
  const pk = `LAGTEST#${randomUUID()}`;
  const put = (sk: string) => db().send(new PutCommand({ TableName: tableName(), Item: { PK: pk, SK: sk, GSI1PK: pk, GSI1SK: sk, id: sk } }));
  const query = () => db().send(new QueryCommand({ TableName: tableName(), IndexName: 'GSI1', KeyConditionExpression: 'GSI1PK = :pk', ExpressionAttributeValues: { ':pk': pk } }));
  await put('A');
  // A follow-up write lands while the helper waits (as a consumer updates what a request wrote).
  const followUp = new Promise((r) => setTimeout(r, LAG_MS / 2)).then(() => put('B'));
  await indexesCaughtUp();
  await followUp;
  expect(((await query()).Items ?? []).map((i) => i.id).sort()).toEqual(['A', 'B']);
});

test('a job filled by two workers under index lag: each verdict, charge and payout once, the job completed, every event delivered, one export of both Files', async () => {
  const { buyer, hook, before, job, subs } = await flow.twoApprovals([700, 701]);
  // An export asked for at once lists the Files through an index that may not have them yet: it is
  // built again until the index agrees with the job's approved count.
  const created = await post(buyer.live, `/v1/jobs/${job.id}/exports`, { format: 'jsonl', min_score: 1 });
  expect(created.status).toBe(202);

  expect(await flow.rt.request('GET', '/v1/billing/credits', { key: buyer.live }).then((r) => r.json)).toMatchObject({ available_cents: before.available_cents - 20, held_cents: 0 });
  expect((await flow.rt.request('GET', `/v1/jobs/${job.id}`, { key: buyer.live })).json).toMatchObject({ status: 'completed', files_approved: 2 });
  const deductions = await waitFor(async () => {
    const d = (await flow.rt.request('GET', '/v1/billing/transactions?type=deduction&limit=100', { key: buyer.live })).json.data as { amount_cents: number; submission_id: string }[];
    return d.length >= 2 ? d : null;
  });
  expect(deductions.map((d) => [d.amount_cents, d.submission_id]).sort()).toEqual(subs.map((s) => [-10, s]).sort());

  // Every event of the flow reaches the endpoint once the lists have caught up.
  const all = await waitFor(async () => {
    const e = (await flow.rt.request('GET', '/v1/webhook_events?limit=100', { key: buyer.live })).json.data as { id: string; type: string; delivery_status: string }[];
    const done = e.filter((x) => x.type === 'job.completed').length === 1 && e.filter((x) => x.type === 'submission.approved').length === 2;
    return done && e.every((x) => x.delivery_status === 'delivered') ? e : null;
  }, { timeoutMs: 60_000 });
  for (const e of all) expect(flow.rx.at(hook).some((r) => r.event.id === e.id)).toBe(true);

  const exp = await flow.finishedExport(buyer.live, created.json.id);
  expect(exp).toMatchObject({ status: 'succeeded', file_count: 2 });
  expect((await (await fetch(exp.download_url)).text()).trimEnd().split('\n')).toHaveLength(2);
});

test('a job cancelled a moment after an upload, under index lag: the upload is never approved after the cancellation, and money moves once', async () => {
  const buyer = await liveBuyer(flow.rt);
  const before = (await flow.rt.request('GET', '/v1/billing/credits', { key: buyer.live })).json;
  const job = await createJob(flow.rt, buyer.live, { files_needed: 2, price_per_file_cents: 10 });
  const {
    workers: [w],
    subs: [subId],
  } = await workersUpload(flow.rt, job.id, [720]);
  const cancelled = await post(buyer.live, `/v1/jobs/${job.id}/cancel`, {});
  expect(cancelled.status).toBe(200);
  // A cancelled job never approves: a verdict that comes after the cancellation rejects the upload
  // and charges nothing. On a slow machine the verdict may commit before the cancellation does;
  // then it is an approval of an active job, dated before the cancellation, charged once.
  const verdict = await waitForVerdict(flow.rt, w!.token, subId!);
  const credits = (await flow.rt.request('GET', '/v1/billing/credits', { key: buyer.live })).json;
  if (verdict.status === 'approved') {
    const cancelledAt = (await flow.rt.request('GET', `/v1/jobs/${job.id}`, { key: buyer.live })).json.cancelled_at as string;
    expect(Date.parse(verdict.scored_at)).toBeLessThanOrEqual(Date.parse(cancelledAt));
    expect(credits).toMatchObject({ available_cents: before.available_cents - 10, held_cents: 0 });
  } else {
    expect(verdict).toMatchObject({ status: 'rejected' });
    expect(credits).toMatchObject({ available_cents: before.available_cents, held_cents: 0 });
  }
});
