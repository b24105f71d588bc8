/**
 * D64: the local runtime loses nothing on a stop. `npm start` runs as its own process group (as in
 * a terminal); SIGINT to the whole group (Ctrl-C) in the middle of a pipeline run saves the queues,
 * and after a SIGKILL of the whole group the start-up reconcilers re-enqueue what the table says is
 * unfinished. After each restart on the same data folder (and port): every upload is scored, every
 * event is delivered to each endpoint (a redelivery carries the same event id), and download URLs
 * handed out before still work.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { freePort } from '../../local/net';
import { startDevReceiver, type DevReceiver } from '../../shared/webhooks/dev-receiver';
import { idemKey, signupBuyer, verifyPhone, type TestBuyer } from '../support/buyers';
import { waitFor, type TestResponse, type TestRuntime } from '../support/harness';
import { accept, detailedJpeg, signupWorker, uploadFile } from '../pipeline/support';

const root = resolve(__dirname, '../..');
const dataDir = mkdtempSync(join(tmpdir(), 'stop-restart-'));
let port: number;
let child: ChildProcess | null = null;
let output = '';
let rx: DevReceiver;

/** The public API of the child runtime, shaped like the test harness' client. */
const api = {
  async request<T = any>(method: string, path: string, opts: { body?: unknown; headers?: Record<string, string>; key?: string } = {}): Promise<TestResponse<T>> {
    const headers: Record<string, string> = { ...opts.headers };
    if (opts.key) headers.Authorization = `Bearer ${opts.key}`;
    let body: string | Buffer | undefined;
    if (typeof opts.body === 'string' || Buffer.isBuffer(opts.body)) body = opts.body;
    else if (opts.body !== undefined) {
      body = JSON.stringify(opts.body);
      headers['Content-Type'] ??= 'application/json';
    }
    const res = await fetch(`http://127.0.0.1:${port}${path}`, { method, headers, body });
    const text = await res.text();
    let json: unknown = null;
    try {
      json = text ? JSON.parse(text) : null;
    } catch {
      json = null;
    }
    return { status: res.status, headers: Object.fromEntries(res.headers), json: json as T, text };
  },
} as unknown as TestRuntime;

async function start(): Promise<void> {
  // As `npm start` does: one node process with tsx as its loader (the tsx CLI's signal relay
  // would SIGKILL a runtime that is slow to acknowledge a Ctrl-C).
  const c = spawn(process.execPath, ['--import', 'tsx', 'local/start.ts'], {
    cwd: root,
    env: { ...process.env, PORT: String(port), DATA_DIR: dataDir, SANDBOX_DELAY_SECONDS: '0', LOCAL_FIXED_OTP: '123456', LOG_LEVEL: 'info', DYNAMODB_ENDPOINT: '' },
    stdio: ['ignore', 'pipe', 'pipe'],
    detached: true, // its own process group, as `npm start` in a terminal
  });
  child = c;
  c.stdout!.on('data', (d: Buffer) => (output += d.toString()));
  c.stderr!.on('data', (d: Buffer) => (output += d.toString()));
  await waitFor(
    async () => {
      if (c.exitCode !== null) throw new Error(`runtime exited with ${c.exitCode}:\n${output.slice(-3000)}`);
      return (await api.request('GET', '/v1/me')).status === 401;
    },
    { timeoutMs: 60_000, intervalMs: 200 },
  );
}

/** Signals the whole process group, as a terminal does, and waits for the runtime to exit. */
async function signalGroup(signal: NodeJS.Signals): Promise<number | null> {
  const c = child!;
  const exited = new Promise<number | null>((r) => c.once('exit', (code) => r(code)));
  process.kill(-c.pid!, signal);
  const code = await exited;
  child = null;
  // Every process of the group is gone (emulators included) before the next start.
  await waitFor(() => {
    try {
      process.kill(-c.pid!, 0);
      return false;
    } catch {
      return true;
    }
  }, { timeoutMs: 30_000, intervalMs: 100 }).catch((err: Error) => {
    const ps = spawnSync('ps', ['-o', 'pid,stat,etime,args', '-g', String(c.pid)], { encoding: 'utf8' }).stdout;
    throw new Error(`${err.message}; exit code ${code}; still running:\n${ps}\n${output.slice(-4000)}`);
  });
  return code;
}

beforeAll(async () => {
  process.env.LOCAL_FIXED_OTP = '123456'; // read by verifyPhone; the child gets the same value
  port = await freePort();
  rx = await startDevReceiver();
});
afterAll(async () => {
  if (child?.pid) {
    try {
      process.kill(-child.pid, 'SIGKILL');
    } catch {
      /* gone */
    }
  }
  await rx?.close();
  rmSync(dataDir, { recursive: true, force: true });
});

const post = (path: string, key: string, body: unknown) => api.request('POST', path, { key, body, headers: { 'Idempotency-Key': idemKey() } });

async function uploadOne(jobId: string, seed: number): Promise<string> {
  const w = await signupWorker(api);
  const a = await accept(api, w.token, jobId);
  expect(a.status).toBe(201);
  const up = await uploadFile(api, w.token, a.json.id, await detailedJpeg(seed, 480, 480));
  expect(up.status).toBe(202);
  return a.json.id as string;
}

// Polls gently: the buyer's key is rate-limited like any free-tier key (60 requests a minute).
async function expectAllScored(key: string, jobId: string, subIds: string[]): Promise<void> {
  await waitFor(
    async () => {
      const r = await api.request('GET', `/v1/jobs/${jobId}/submissions?limit=100`, { key });
      if (r.status !== 200) return false;
      const subs = r.json.data as { id: string; status: string }[];
      return subIds.every((id) => subs.some((s) => s.id === id && s.status !== 'pending_score'));
    },
    { timeoutMs: 120_000, intervalMs: 1_500, what: 'every upload scored' },
  );
}

/** Every live event of the organization is delivered to both endpoints; duplicates keep the event id. */
async function expectAllDelivered(key: string): Promise<number> {
  let last: { id: string; deliveries: { endpoint_id: string; status: string }[] }[] | null = null;
  const events = await waitFor(
    async () => {
      const r = await api.request('GET', '/v1/webhook_events?limit=100', { key });
      if (r.status !== 200) return null;
      const list = r.json.data as { id: string; deliveries: { endpoint_id: string; status: string }[] }[];
      last = list;
      return list.length > 0 && list.every((e) => e.deliveries.length === 2 && e.deliveries.every((d) => d.status === 'delivered')) ? list : null;
    },
    { timeoutMs: 120_000, intervalMs: 1_500, what: 'every event delivered to both endpoints' },
  ).catch(async (err: Error) => {
    const open = (last ?? []).filter((e) => e.deliveries.some((d) => d.status !== 'delivered') || e.deliveries.length !== 2);
    // What the runtime said about those events, and the endpoints as they are now.
    const endpoints = await api.request('GET', '/v1/webhook_endpoints', { key });
    const said = output.split('\n').filter((l) => open.some((e) => l.includes(e.id)));
    throw new Error(`${err.message}: ${JSON.stringify(open)}\nendpoints: ${endpoints.text}\nruntime log of those events:\n${said.join('\n').slice(-6000)}`);
  });
  for (const path of ['/one', '/two']) {
    const got = rx.at(path);
    for (const e of events) expect(got.filter((r) => r.event.id === e.id).length).toBeGreaterThanOrEqual(1);
    for (const r of got) expect(r.headers['webhook-id']).toBe(r.event.id);
  }
  return events.length;
}

test('Ctrl-C (SIGINT to the group) mid-pipeline, then SIGKILL mid-pipeline: after each restart everything is scored, delivered and downloadable', async () => {
  const t0 = Date.now();
  await start();
  const buyer: TestBuyer = await signupBuyer(api, 'Restart Co');
  await verifyPhone(api, buyer.live, `+1415${String(Date.now()).slice(-7)}`);
  for (const path of ['/one', '/two']) expect((await post('/v1/webhook_endpoints', buyer.live, { url: `${rx.url}${path}`, events: ['*'] })).status).toBe(201);
  const job = await post('/v1/jobs', buyer.live, {
    type: 'data_collection',
    description: 'Photos of storefronts in daylight, whole front visible.',
    files_needed: 6,
    accepted_formats: ['image/jpeg'],
    price_per_file_cents: 10,
  });
  expect(job.status).toBe(201);
  const jobId = job.json.id as string;

  // 1. Ctrl-C in the middle of a pipeline run.
  const first = [await uploadOne(jobId, 1), await uploadOne(jobId, 2)];
  expect(await signalGroup('SIGINT')).toBe(0);
  // A clean stop: the emulators outlived the group's SIGINT, the queues were saved, the marker went.
  expect(output).not.toMatch(/stop failed/);
  expect(existsSync(join(dataDir, 'runtime.running'))).toBe(false);
  const t1 = Date.now();
  await start();
  await expectAllScored(buyer.live, jobId, first);
  const afterInt = await expectAllDelivered(buyer.live);
  const recoveredInt = Date.now() - t1;
  const files = await api.request('GET', `/v1/jobs/${jobId}/files`, { key: buyer.live });
  expect(files.status).toBe(200);
  const urls = (files.json.data as { download_url: string }[]).map((f) => f.download_url);
  for (const u of urls) expect((await fetch(u)).status).toBe(200);

  // 2. SIGKILL of the whole group in the middle of a pipeline run: nothing saved.
  const second = [await uploadOne(jobId, 3), await uploadOne(jobId, 4)];
  await signalGroup('SIGKILL');
  expect(existsSync(join(dataDir, 'runtime.running'))).toBe(true); // the next start knows
  const t2 = Date.now();
  await start();
  await expectAllScored(buyer.live, jobId, [...first, ...second]);
  const afterKill = await expectAllDelivered(buyer.live);
  const recoveredKill = Date.now() - t2;
  // Download URLs handed out before both stops still work.
  for (const u of urls) {
    const r = await fetch(u);
    expect(r.status).toBe(200);
    expect((await r.arrayBuffer()).byteLength).toBeGreaterThan(0);
  }
  expect(await signalGroup('SIGTERM')).toBe(0);

  const dupes = ['/one', '/two'].map((p) => rx.at(p).length - new Set(rx.at(p).map((r) => r.event.id)).size);
  console.info(
    `stop-and-restart: ${afterInt} events after SIGINT, ${afterKill} after SIGKILL; recovered (restart → all scored and delivered) ` +
      `${recoveredInt} ms after SIGINT, ${recoveredKill} ms after SIGKILL; duplicate deliveries per endpoint ${dupes.join('/')}; total ${Date.now() - t0} ms`,
  );
  if (existsSync(join(dataDir, 'stream-dead-letters.jsonl'))) throw new Error(readFileSync(join(dataDir, 'stream-dead-letters.jsonl'), 'utf8'));
}, 300_000);

test('npm start lags its indexes by 500 ms unless LOCAL_INDEX_LAG_MS says otherwise, and says so at start', async () => {
  // The lag itself (index reads leave out fresh writes) is tested on a runtime of the harness, where
  // timing is under the test's control: test/pipeline/index-lag.test.ts.
  output = '';
  await start();
  expect(output).toMatch(/^ {2}Index lag {8}500 ms, as DynamoDB's indexes lag the table \(LOCAL_INDEX_LAG_MS\)$/m);
  expect(await signalGroup('SIGTERM')).toBe(0);
}, 120_000);
