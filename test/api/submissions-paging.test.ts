/**
 * GET /v1/submissions pages through a defaulted date range (D12): the range the first page
 * resolved is the range of every next page, however much later it is asked for.
 */
import { startTestRuntime, type TestRuntime, indexesCaughtUp } from '../support/harness';
import { clock } from '../../shared/clock';
import { accept, createJob, detailedJpeg, liveBuyer, signupWorker, uploadFile } from '../pipeline/support';

let rt: TestRuntime;
let key: string;
let submissionIds: string[];

beforeAll(async () => {
  process.env.LOCAL_FIXED_OTP = '123456';
  // No pipeline: the three uploads stay pending_score, listed and unchanged while we page.
  rt = await startTestRuntime({ enablePollers: false });
  const buyer = await liveBuyer(rt);
  key = buyer.live;
  const job = await createJob(rt, key, { files_needed: 3 });
  submissionIds = [];
  for (let i = 0; i < 3; i++) {
    const w = await signupWorker(rt);
    const a = await accept(rt, w.token, job.id);
    expect(a.status).toBe(201);
    expect((await uploadFile(rt, w.token, a.json.id, await detailedJpeg(300 + i))).status).toBe(202);
    submissionIds.push(a.json.id);
  }
}, 120_000);
afterAll(() => rt?.stop());
afterEach(() => clock.reset());

/** Pages with limit=1, following next_cursor a second of clock apart; every page's status and the ids seen. */
async function pageThrough(query: string) {
  await indexesCaughtUp(); // the submissions list reads an index; the subject here is its paging
  const statuses: number[] = [];
  const seen: string[] = [];
  let path = `/v1/submissions?limit=1${query}`;
  for (let page = 0; page < 10; page++) {
    const r = await rt.request('GET', path, { key });
    statuses.push(r.status);
    if (r.status !== 200) break;
    seen.push(...r.json.data.map((s: { id: string }) => s.id));
    if (!r.json.has_more) break;
    clock.advance(1000);
    path = `/v1/submissions?limit=1${query}&cursor=${encodeURIComponent(r.json.next_cursor)}`;
  }
  return { statuses, seen };
}

test('without dates, following next_cursor twice answers 200 each time and lists each submission once', async () => {
  const { statuses, seen } = await pageThrough('');
  expect(statuses).toEqual([200, 200, 200]);
  expect([...seen].sort()).toEqual([...submissionIds].sort());
});

test('with only start_date, following next_cursor twice answers 200 each time and lists each submission once', async () => {
  const start = new Date(Date.now() - 60 * 60_000).toISOString();
  const { statuses, seen } = await pageThrough(`&start_date=${encodeURIComponent(start)}`);
  expect(statuses).toEqual([200, 200, 200]);
  expect([...seen].sort()).toEqual([...submissionIds].sort());
});

test('a cursor is still refused on a query with other parameters', async () => {
  const first = await rt.request('GET', '/v1/submissions?limit=1', { key });
  expect(first.json.has_more).toBe(true);
  const start = new Date(Date.now() - 60 * 60_000).toISOString();
  const r = await rt.request('GET', `/v1/submissions?limit=1&start_date=${encodeURIComponent(start)}&cursor=${encodeURIComponent(first.json.next_cursor)}`, { key });
  expect(r.status).toBe(400);
  expect(r.json.error.details[0]).toMatchObject({ field: 'cursor', code: 'invalid_cursor' });
});
