import { startTestRuntime, type TestRuntime, indexesCaughtUp } from '../support/harness';
import { accept, createJob, detailedJpeg, liveBuyer, signupWorker, uploadFile } from '../pipeline/support';
import { clock, HOUR_MS } from '../../shared/clock';
import { handler as sweep } from '../../functions/scheduled/reservation-sweep';
import { beforeFirstTransaction, cancelTransactionsWhile } from '../support/transaction-conflicts';
import { idTime } from '../../shared/ids';
import { keys } from '../../shared/db/keys';

// Worker routes without the pipeline: the job board, slots and reservations (D23, D24, D45), flags (D35).
describe('worker routes: job board, accept, withdraw, flag, reservation expiry', () => {
  let rt: TestRuntime;

  beforeAll(async () => {
    process.env.LOCAL_FIXED_OTP = '123456';
    rt = await startTestRuntime({ enablePollers: false });
  });
  afterAll(async () => {
    clock.reset();
    await rt?.stop();
  });

  // The board and the lists are read from indexes: each read here waits out their lag first.
  const board = async (token: string) => (await indexesCaughtUp(), await rt.request('GET', '/internal/worker/jobs/available?limit=100', { key: token })).json.data as any[];
  const job = async (key: string, id: string) => (await rt.request('GET', `/v1/jobs/${id}`, { key })).json;

  it('D23/D45: a job with free slots is on the board with its worker view; accept reserves slots for 60 minutes', async () => {
    const buyer = await liveBuyer(rt);
    const j = await createJob(rt, buyer.live, { files_needed: 2, price_per_file_cents: 50, min_width: 100 });
    const w = await signupWorker(rt);
    const entry = (await board(w.token)).find((x) => x.id === j.id);
    expect(entry).toMatchObject({ object: 'worker_job', id: j.id, worker_payout_per_file_cents: 40, slots_available: 2, files_per_submission: 1, min_width: 100 });
    // D45's fields only: the buyer's scoring criteria and minimum rating are not shown to workers.
    expect(entry).not.toHaveProperty('scoring_criteria');
    expect(entry).not.toHaveProperty('min_star_rating');

    const a = await accept(rt, w.token, j.id);
    expect(a.status).toBe(201);
    expect(a.json).toMatchObject({ object: 'submission', job_id: j.id, status: 'awaiting_upload', files_expected: 1 });
    const until = new Date(a.json.reserved_until).getTime();
    expect(until - Date.now()).toBeGreaterThan(59 * 60_000);
    expect(until - Date.now()).toBeLessThanOrEqual(60 * 60_000 + 1000);
    expect((await board(w.token)).find((x) => x.id === j.id)?.slots_available).toBe(1);

    // D45: a second accept while the reservation is active is 409.
    const again = await accept(rt, w.token, j.id);
    expect(again.status).toBe(409);
    expect(again.json.error.details[0].code).toBe('reservation_exists');

    // D24: buyers never see a submission awaiting its upload.
    expect((await rt.request('GET', `/v1/submissions/${a.json.id}`, { key: buyer.live })).status).toBe(404);
    expect((await rt.request('GET', `/v1/jobs/${j.id}/submissions`, { key: buyer.live })).json.data).toEqual([]);
    // The worker sees it in the history and by id.
    const mine = await rt.request('GET', '/internal/worker/submissions', { key: w.token });
    expect(mine.json.data.map((s: any) => s.id)).toEqual([a.json.id]);
    expect((await rt.request('GET', `/internal/worker/submissions/${a.json.id}`, { key: w.token })).json.status).toBe('awaiting_upload');
  });

  it("D1: an accept that commits on its second try has that try's id: its created_at is the time its id carries", async () => {
    const buyer = await liveBuyer(rt);
    const j = await createJob(rt, buyer.live, { files_needed: 3 });
    const [w1, w2] = [await signupWorker(rt), await signupWorker(rt)];
    // Another worker's accept commits between this accept's read of the job and its commit.
    const other = beforeFirstTransaction(
      (input) => JSON.stringify(input).includes(w1.id),
      async () => expect((await accept(rt, w2.token, j.id)).status).toBe(201),
    );
    let a;
    try {
      a = await accept(rt, w1.token, j.id);
    } finally {
      other.remove();
    }
    expect(other.fired()).toBe(true);
    expect(a.status).toBe(201);
    expect(idTime(a.json.id).toISOString()).toBe(a.json.created_at);
  });

  it("the buyer's submission lists are newest first by submitted_at, and start_date reads it: a reservation accepted first and uploaded last lists first", async () => {
    const buyer = await liveBuyer(rt);
    const j = await createJob(rt, buyer.live, { files_needed: 2 });
    const [w1, w2] = [await signupWorker(rt), await signupWorker(rt)];
    const first = await accept(rt, w1.token, j.id);
    const second = await accept(rt, w2.token, j.id);
    expect((await uploadFile(rt, w2.token, second.json.id, await detailedJpeg(301))).status).toBe(202);
    await new Promise((r) => setTimeout(r, 5));
    expect((await uploadFile(rt, w1.token, first.json.id, await detailedJpeg(302))).status).toBe(202);
    const listed = async (path: string) => (await indexesCaughtUp(), await rt.request('GET', path, { key: buyer.live })).json.data as { id: string; submitted_at: string }[];
    const all = await listed('/v1/submissions');
    const ours = all.filter((x) => x.id === first.json.id || x.id === second.json.id);
    expect(ours.map((x) => x.id)).toEqual([first.json.id, second.json.id]);
    expect((await listed(`/v1/jobs/${j.id}/submissions`)).map((x) => x.id)).toEqual([first.json.id, second.json.id]);
    // Polling from the upload the buyer saw last: the one uploaded after it is there, though accepted before.
    const since = new Date(Date.parse(ours[1]!.submitted_at) + 1).toISOString();
    expect((await listed(`/v1/submissions?start_date=${since}`)).map((x) => x.id)).toEqual([first.json.id]);
  });

  it('D23: the last free slot taken moves open → filled and hides the job; withdraw frees it (filled → open)', async () => {
    const buyer = await liveBuyer(rt);
    const j = await createJob(rt, buyer.live, { files_needed: 2, files_per_submission: 2 });
    const w1 = await signupWorker(rt);
    const w2 = await signupWorker(rt);
    const a = await accept(rt, w1.token, j.id);
    expect(a.status).toBe(201);
    expect(a.json.files_expected).toBe(2);
    expect((await job(buyer.live, j.id)).status).toBe('filled');
    expect((await board(w2.token)).some((x) => x.id === j.id)).toBe(false);
    const refused = await accept(rt, w2.token, j.id);
    expect(refused.status).toBe(409);
    expect(refused.json.error.details[0].code).toBe('no_free_slots');

    const wd = await rt.request('POST', `/internal/worker/jobs/${j.id}/withdraw`, { key: w1.token });
    expect(wd.status).toBe(200);
    expect(wd.json.status).toBe('withdrawn');
    expect((await job(buyer.live, j.id)).status).toBe('open');
    expect((await board(w2.token)).find((x) => x.id === j.id)?.slots_available).toBe(2);
    // Withdrawing again: nothing to give back.
    expect((await rt.request('POST', `/internal/worker/jobs/${j.id}/withdraw`, { key: w1.token })).status).toBe(409);
  });

  it('D23: an expired reservation frees its slots without any request (reservation sweep)', async () => {
    const buyer = await liveBuyer(rt);
    const j = await createJob(rt, buyer.live, { files_needed: 1 });
    const w = await signupWorker(rt);
    const a = await accept(rt, w.token, j.id);
    expect((await job(buyer.live, j.id)).status).toBe('filled');
    clock.advance(HOUR_MS + 60_000);
    await indexesCaughtUp(); // the sweep is scheduled, minutes after these writes, and reads an index
    try {
      const out = await sweep({ time: new Date().toISOString() } as never);
      expect(out.released).toBeGreaterThanOrEqual(1);
    } finally {
      clock.reset();
    }
    expect((await job(buyer.live, j.id)).status).toBe('open');
    const sub = await rt.request('GET', `/internal/worker/submissions/${a.json.id}`, { key: w.token });
    expect(sub.json.status).toBe('expired');
    // The worker may accept again afterwards.
    expect((await accept(rt, w.token, j.id)).status).toBe(201);
  });

  it("D23: a worker whose own reservation filled the job and expired may accept again before any sweep: the expired one is released first", async () => {
    const buyer = await liveBuyer(rt);
    const j = await createJob(rt, buyer.live, { files_needed: 1 });
    const w = await signupWorker(rt);
    const first = await accept(rt, w.token, j.id);
    expect((await job(buyer.live, j.id)).status).toBe('filled');
    clock.advance(HOUR_MS + 60_000);
    try {
      const again = await accept(rt, w.token, j.id);
      expect(again.status).toBe(201);
      expect(again.json.id).not.toBe(first.json.id);
    } finally {
      clock.reset();
    }
    expect((await rt.request('GET', `/internal/worker/submissions/${first.json.id}`, { key: w.token })).json.status).toBe('expired');
    expect((await job(buyer.live, j.id)).status).toBe('filled');
  });

  it('D23: when fewer slots are left than files_per_submission, the last acceptance takes the slots left (the job can still be completed)', async () => {
    const buyer = await liveBuyer(rt);
    const j = await createJob(rt, buyer.live, { files_needed: 3, files_per_submission: 2 });
    const [w1, w2, w3] = await Promise.all([signupWorker(rt), signupWorker(rt), signupWorker(rt)]);
    const first = await accept(rt, w1.token, j.id);
    expect([first.status, first.json.files_expected]).toEqual([201, 2]);
    expect((await board(w2.token)).find((x) => x.id === j.id)?.slots_available).toBe(1);
    const last = await accept(rt, w2.token, j.id);
    expect([last.status, last.json.files_expected]).toEqual([201, 1]);
    const none = await accept(rt, w3.token, j.id);
    expect([none.status, none.json.error?.details?.[0]?.code]).toEqual([409, 'no_free_slots']);
    expect((await job(buyer.live, j.id)).status).toBe('filled');
  });

  it('D35: flagging a job emits job.flagged once per worker; a second flag is 409', async () => {
    const buyer = await liveBuyer(rt);
    const j = await createJob(rt, buyer.live);
    const w1 = await signupWorker(rt);
    const w2 = await signupWorker(rt);
    const f1 = await rt.request('POST', `/internal/worker/jobs/${j.id}/flag`, { key: w1.token, body: { reason: 'Price too low for the work' } });
    expect(f1.status).toBe(200);
    expect(f1.json).toMatchObject({ object: 'job_flag', job_id: j.id, flag_count: 1 });
    const f2 = await rt.request('POST', `/internal/worker/jobs/${j.id}/flag`, { key: w2.token, body: { reason: 'Unclear' } });
    expect(f2.json.flag_count).toBe(2);
    expect((await rt.request('POST', `/internal/worker/jobs/${j.id}/flag`, { key: w1.token, body: { reason: 'again' } })).status).toBe(409);
    await indexesCaughtUp();
    const events = await rt.request('GET', '/v1/webhook_events?type=job.flagged', { key: buyer.live });
    if (events.status === 200) {
      expect(events.json.data.map((e: any) => e.data?.flag_count ?? e.envelope?.data?.flag_count).sort()).toEqual([1, 2]);
    }
    // Strict body (D4).
    expect((await rt.request('POST', `/internal/worker/jobs/${j.id}/flag`, { key: w2.token, body: { reason: 'x', extra: 1 } })).status).toBe(400);
  });

  it('D35: a job no longer taking submissions cannot be flagged (409, no event)', async () => {
    const buyer = await liveBuyer(rt);
    const j = await createJob(rt, buyer.live);
    const w = await signupWorker(rt);
    expect((await rt.request('POST', `/v1/jobs/${j.id}/cancel`, { key: buyer.live, headers: { 'Idempotency-Key': `c-${j.id}` } })).status).toBe(200);
    const f = await rt.request('POST', `/internal/worker/jobs/${j.id}/flag`, { key: w.token, body: { reason: 'Price too low' } });
    expect([f.status, f.json.error?.details?.[0]?.code]).toEqual([409, 'job_cancelled']);
    const events = await rt.request('GET', '/v1/webhook_events?type=job.flagged&limit=100', { key: buyer.live });
    expect(events.status).toBe(200);
    expect(events.json.data.filter((e: { data: { job_id: string } }) => e.data.job_id === j.id)).toEqual([]);
  });

  it('D9: worker routes refuse buyer keys; a job of another environment is 404', async () => {
    const buyer = await liveBuyer(rt);
    expect((await rt.request('GET', '/internal/worker/jobs/available', { key: buyer.live })).status).toBe(401);
    const testJob = await createJob(rt, buyer.test);
    const w = await signupWorker(rt);
    expect((await accept(rt, w.token, testJob.id)).status).toBe(404);
  });

  it('an accept under lasting contention on its job answers 409 transaction_conflict with Retry-After before the route times out', async () => {
    const buyer = await liveBuyer(rt);
    const j = await createJob(rt, buyer.live, { files_needed: 2 });
    const w = await signupWorker(rt);
    // Every transaction naming the job's item is cancelled as DynamoDB cancels one that meets
    // another in progress: the accept's rounds keep meeting contention.
    const jobPk = String(keys.job(j.id).PK);
    const remove = cancelTransactionsWhile((input) => JSON.stringify(input).includes(jobPk));
    try {
      const r = await accept(rt, w.token, j.id);
      expect(r.status).toBe(409);
      expect(r.json.error.details[0].code).toBe('transaction_conflict');
      expect(r.headers['retry-after']).toBe('1');
    } finally {
      remove();
    }
    // Nothing was reserved, and the job takes the accept once the contention is over.
    expect((await accept(rt, w.token, j.id)).status).toBe(201);
  }, 40_000);
});
