/**
 * The command-line tool, run as the real binary (packages/client/bin/media-marketplace.js) against
 * the local stack: jobs commands and exit codes, a verified parallel download with a progress bar,
 * an interrupted download resumed (matching files skipped, everything verified), and the local
 * webhook receiver verifying and printing deliveries.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync, unlinkSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { ROUTES } from '../../shared/manifest/routes';
import { EXIT } from '../../packages/client/src/cli';
import { startTestRuntime, waitFor, type TestRuntime } from '../support/harness';
import { idemKey, signupBuyer, type TestBuyer } from '../support/buyers';

const BIN = resolve(__dirname, '../../packages/client/bin/media-marketplace.js');

let rt: TestRuntime;
let buyer: TestBuyer;
let tmp: string;
beforeAll(async () => {
  // As `npm start` runs its indexes (500 ms behind the table); the sandbox's ticks a second apart,
  // longer than the lag, as deployed (15 s).
  rt = await startTestRuntime({ sandboxDelaySeconds: 1, indexLagMs: 500 });
  buyer = await signupBuyer(rt, 'CLI Co');
  tmp = mkdtempSync(join(tmpdir(), 'cli-test-'));
});
afterAll(async () => {
  await rt?.stop();
  rmSync(tmp, { recursive: true, force: true });
});

interface Run {
  child: ChildProcess;
  stdout: () => string;
  stderr: () => string;
  done: Promise<number>;
}

function start(args: string[], env: Record<string, string> = {}): Run {
  const child = spawn(process.execPath, [BIN, ...args], {
    env: { ...process.env, MARKETPLACE_BASE_URL: rt.url, MARKETPLACE_API_KEY: buyer.test, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  let err = '';
  child.stdout!.on('data', (c: Buffer) => (out += c.toString()));
  child.stderr!.on('data', (c: Buffer) => (err += c.toString()));
  const done = new Promise<number>((res) => child.on('close', (code, signal) => res(code ?? (signal ? 128 : -1))));
  return { child, stdout: () => out, stderr: () => err, done };
}

async function run(args: string[], env: Record<string, string> = {}) {
  const r = start(args, env);
  const code = await r.done;
  return { code, stdout: r.stdout(), stderr: r.stderr() };
}

const sha = (path: string) => `sha256:${createHash('sha256').update(readFileSync(path)).digest('hex')}`;

async function completedSandboxJob(filesNeeded: number): Promise<string> {
  const r = await rt.request('POST', '/v1/jobs', {
    key: buyer.test,
    headers: { 'Idempotency-Key': idemKey() },
    body: { type: 'data_collection', description: 'Photos of colourful shapes for the CLI tests', files_needed: filesNeeded, accepted_formats: ['image/jpeg'], price_per_file_cents: 25 },
  });
  expect(r.status).toBe(201);
  return r.json.id;
}

describe('jobs', () => {
  test('jobs create, then jobs wait returns the completed job (exit 0)', async () => {
    const created = await run(['jobs', 'create', '--description', 'Photos of colourful shapes, from the CLI', '--files-needed', '1', '--price', '25']);
    expect(created.code).toBe(0);
    const job = JSON.parse(created.stdout);
    expect(job).toMatchObject({ object: 'job', status: 'open', files_needed: 1 });
    const waited = await run(['jobs', 'wait', job.id, '--timeout', '90']);
    expect(waited.stderr).toBe('');
    expect(waited.code).toBe(0);
    expect(JSON.parse(waited.stdout)).toMatchObject({ id: job.id, status: 'completed', files_approved: 1 });
    const listed = await run(['jobs', 'list']);
    expect(listed.stdout.split('\n').filter(Boolean).map((l) => JSON.parse(l).id)).toContain(job.id);
  });

  test('failures are one line on stderr with a documented exit code', async () => {
    const missing = await run(['jobs', 'get', 'job_01ARZ3NDEKTSV4RRFFQ69G5FAV']);
    expect(missing.code).toBe(4);
    expect(missing.stderr.trim().split('\n')).toHaveLength(1);
    expect(missing.stderr).toMatch(/^error: .*\[not_found, HTTP 404, request req_\w+\]\n$/);

    const badKey = await run(['jobs', 'list'], { MARKETPLACE_API_KEY: 'svc_test_sk_nope' });
    expect(badKey.code).toBe(3);
    const invalid = await run(['jobs', 'create', '--description', 'short', '--files-needed', '1', '--price', '25']);
    expect(invalid.code).toBe(5);
    expect(invalid.stderr).toMatch(/^error: .*description.*\[validation_error, HTTP 400/);
    const usage = await run(['jobs', 'frobnicate']);
    expect(usage.code).toBe(2);
    const down = await run(['jobs', 'list'], { MARKETPLACE_BASE_URL: 'http://127.0.0.1:9' });
    expect(down.code).toBe(6);
    expect(down.stderr).toMatch(/^error: cannot reach http:\/\/127\.0\.0\.1:9/);
  });

  test('jobs wait / exports create --timeout that is not a number of seconds, 0 or more, is a usage error (exit 2)', async () => {
    for (const bad of ['abc', '-5', '']) {
      const r = await run(['jobs', 'wait', 'job_01ARZ3NDEKTSV4RRFFQ69G5FAV', '--timeout', bad]);
      expect(r.code).toBe(2);
      expect(r.stdout).toBe('');
      expect(r.stderr).toMatch(/^error: option '--timeout <seconds>' argument '.*' is invalid/);
    }
    const out = join(tmp, 'never.jsonl');
    const ex = await run(['exports', 'create', 'job_01ARZ3NDEKTSV4RRFFQ69G5FAV', '--out', out, '--timeout', 'soon']);
    expect(ex.code).toBe(2);
  });
  test('a numeric option that is not a whole number in its range is a usage error (exit 2), and nothing is sent', async () => {
    // The service is unreachable here: a command that sent anything would end with exit 6.
    const env = { MARKETPLACE_BASE_URL: 'http://127.0.0.1:9' };
    const cases: [string[], string][] = [
      [['jobs', 'create', '--description', 'x', '--files-needed', 'two'], '--files-needed <n>'],
      [['jobs', 'create', '--description', 'x', '--files-needed', '1.5'], '--files-needed <n>'],
      [['jobs', 'create', '--description', 'x', '--price', 'abc'], '--price <cents>'],
      [['jobs', 'create', '--description', 'x', '--price', '-1'], '--price <cents>'],
      [['jobs', 'list', '--max', 'ten'], '--max <n>'],
      [['files', 'download', 'job_01ARZ3NDEKTSV4RRFFQ69G5FAV', '--out', join(tmp, 'never'), '--min-score', '6'], '--min-score <n>'],
      [['exports', 'create', 'job_01ARZ3NDEKTSV4RRFFQ69G5FAV', '--out', join(tmp, 'never.jsonl'), '--min-score', '0'], '--min-score <n>'],
      [['webhooks', 'listen', '--port', '70000', '--secret', 'whsec_x'], '--port <n>'],
    ];
    for (const [args, option] of cases) {
      const r = await run(args, env);
      expect({ args, code: r.code, stdout: r.stdout }).toEqual({ args, code: 2, stdout: '' });
      expect(r.stderr).toContain(`error: option '${option}' argument`);
    }
  });
});

describe('files download', () => {
  let jobId: string;
  let files: { id: string; content_hash: string; size_bytes: number }[];
  beforeAll(async () => {
    jobId = await completedSandboxJob(3);
    await waitFor(async () => (await rt.request('GET', `/v1/jobs/${jobId}`, { key: buyer.test, headers: { Prefer: 'wait=20' } })).json.status === 'completed', { timeoutMs: 90_000 });
    files = (await rt.request('GET', `/v1/jobs/${jobId}/files`, { key: buyer.test })).json.data;
    expect(files).toHaveLength(3);
  });

  const verifyFolder = (dir: string) => {
    const names = readdirSync(dir).sort();
    expect(names).toHaveLength(3);
    for (const f of files) {
      const name = names.find((n) => n.startsWith(`${f.id}_`));
      expect(name).toBeDefined();
      expect(sha(join(dir, name!))).toBe(f.content_hash);
    }
  };

  test('downloads every file in parallel with a progress bar of bytes and files, each verified against content_hash', async () => {
    const out = join(tmp, 'download');
    const r = await run(['--progress', 'always', 'files', 'download', jobId, '--out', out]);
    expect(r.code).toBe(0);
    expect(r.stderr).toContain('files 3/3');
    expect(r.stderr).toMatch(/\d+\.\d\d MB of \d+\.\d\d MB/);
    expect(JSON.parse(r.stdout)).toMatchObject({ job_id: jobId, files: 3, downloaded: 3, skipped: 0 });
    verifyFolder(out);
  });

  test('--concurrency that is not a whole number above 0 is a usage error (exit 2) and downloads nothing', async () => {
    for (const bad of ['x', '0', '-2', '1.5']) {
      const out = join(tmp, `concurrency-${bad}`);
      const r = await run(['files', 'download', jobId, '--out', out, '--concurrency', bad]);
      expect(r.code).toBe(2);
      expect(r.stdout).toBe('');
      expect(r.stderr).toMatch(/^error: option '--concurrency <n>' argument '.*' is invalid/);
    }
  });

  test('an interrupted download resumes: files whose sha256 matches are skipped, the rest fetched and verified', async () => {
    const out = join(tmp, 'resume');
    // A real interruption: SIGINT as soon as the progress bar shows.
    const first = start(['--progress', 'always', 'files', 'download', jobId, '--out', out, '--concurrency', '1']);
    await waitFor(() => first.stderr().includes('files '), { timeoutMs: 20_000 });
    first.child.kill('SIGINT');
    await first.done;

    // Whatever the interruption left, make the worst case certain: one good file, one corrupted,
    // one missing, and a half-written part file.
    const full = await run(['files', 'download', jobId, '--out', out]);
    expect(full.code).toBe(0);
    const names = readdirSync(out).sort();
    writeFileSync(join(out, names[1]!), 'not the bytes');
    unlinkSync(join(out, names[2]!));
    writeFileSync(join(out, `${names[2]!}.part`), 'half');

    const resumed = await run(['--progress', 'always', 'files', 'download', jobId, '--out', out]);
    expect(resumed.code).toBe(0);
    expect(JSON.parse(resumed.stdout)).toMatchObject({ files: 3, downloaded: 2, skipped: 1 });
    expect(resumed.stderr).toContain('skipped 1');
    verifyFolder(out);
  });
});

const exportsLanded = ROUTES.some((r) => r.method === 'POST' && r.path === '/v1/jobs/{job_id}/exports');
describe('exports create', () => {
  test('creates a JSONL export, waits for it and downloads it with progress', async () => {
    const jobId = await completedSandboxJob(1);
    await waitFor(async () => (await rt.request('GET', `/v1/jobs/${jobId}`, { key: buyer.test, headers: { Prefer: 'wait=20' } })).json.status === 'completed', { timeoutMs: 90_000 });
    const out = join(tmp, 'export.jsonl');
    const r = await run(['--progress', 'always', 'exports', 'create', jobId, '--format', 'jsonl', '--out', out]);
    expect(r.stderr).toContain('export |');
    expect(r.code).toBe(0);
    const lines = readFileSync(out, 'utf8').split('\n').filter(Boolean).map((l) => JSON.parse(l));
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatchObject({ job_id: jobId });
  });
});

function freePort(): Promise<number> {
  return new Promise((res, rej) => {
    const s = createServer();
    s.once('error', rej);
    s.listen(0, '127.0.0.1', () => {
      const port = (s.address() as { port: number }).port;
      s.close(() => res(port));
    });
  });
}

test("the README's exit-code table is what the CLI does: 8 is a download's integrity, and a forged webhook is answered 400 while listen runs on", () => {
  const readme = readFileSync(resolve(__dirname, '../../README.md'), 'utf8');
  const rows = [...readme.matchAll(/^\| (\d+) \| (.+) \|$/gm)].map((m) => [Number(m[1]), m[2]!] as const);
  const table = new Map(rows);
  expect([...table.keys()].sort()).toEqual(Object.values(EXIT).sort());
  expect(table.get(EXIT.integrity)).toMatch(/hash/);
  expect(table.get(EXIT.integrity)).not.toMatch(/webhook|signature/);
  expect(table.get(EXIT.usage)).toMatch(/bad option value/);
  expect(readme).toMatch(/`webhooks listen` never exits 8[^\n]*\n?[^\n]*400/);
});

describe('webhooks listen', () => {
  test('verifies each delivery and prints the event; a forged one is refused with 400 and one stderr line', async () => {
    const port = await freePort();
    const ep = await rt.request('POST', '/v1/webhook_endpoints', {
      key: buyer.test,
      headers: { 'Idempotency-Key': idemKey() },
      body: { url: `http://127.0.0.1:${port}/hooks`, events: ['job.completed'] },
    });
    expect(ep.status).toBe(201);
    const listener = start(['webhooks', 'listen', '--port', String(port), '--secret', ep.json.secret]);
    try {
      await waitFor(() => listener.stderr().includes(`listening on http://127.0.0.1:${port}`), { timeoutMs: 20_000 });
      const jobId = await completedSandboxJob(1);
      const line = await waitFor(
        () => listener.stdout().split('\n').filter(Boolean).map((l) => JSON.parse(l)).find((e) => e.type === 'job.completed' && e.data.job_id === jobId),
        { timeoutMs: 90_000 },
      );
      expect(line).toMatchObject({ object: 'event', type: 'job.completed', environment: 'test' });

      const forged = await fetch(`http://127.0.0.1:${port}/hooks`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-service-signature': '00'.repeat(32) },
        body: JSON.stringify({ id: 'evt_forged', type: 'job.completed' }),
      });
      expect(forged.status).toBe(400);
      await waitFor(() => /error: no valid standard signature/.test(listener.stderr()));
      expect(listener.stdout()).not.toContain('evt_forged');
    } finally {
      listener.child.kill('SIGINT');
    }
    expect(await listener.done).toBe(0);
  });
});
