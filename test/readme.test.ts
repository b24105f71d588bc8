/**
 * The README's walkthroughs run as written (a doc-test): every ```bash block of README.md, in
 * order, in one bash session with `set -euo pipefail`, against a fresh local stack. A snippet
 * that fails (a non-2xx answer, a missing field, a hash mismatch) fails this test, so the README
 * cannot drift from the service. ```sh blocks are illustrations (installs, deploys) and not run.
 */
import { spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { startTestRuntime, type TestRuntime } from './support/harness';

const ROOT = resolve(__dirname, '..');
const README = readFileSync(join(ROOT, 'README.md'), 'utf8');

export function bashBlocks(markdown: string): string[] {
  return [...markdown.matchAll(/^```bash\n([\s\S]*?)^```$/gm)].map((m) => m[1]!);
}

let rt: TestRuntime;
let work: string;
beforeAll(async () => {
  process.env.LOCAL_FIXED_OTP = '123456';
  // As `npm start` runs: its indexes lag the table by 500 ms (local/start.ts), so the walkthroughs
  // work for a reader who runs them as scripts, back to back, as they would deployed.
  rt = await startTestRuntime({ sandboxDelaySeconds: 1, indexLagMs: 500 });
  // A scratch folder standing in for the reader's checkout: the samples, and the CLI as npx finds it.
  work = mkdtempSync(join(tmpdir(), 'readme-'));
  symlinkSync(join(ROOT, 'samples'), join(work, 'samples'));
  mkdirSync(join(work, 'node_modules', '.bin'), { recursive: true });
  symlinkSync(join(ROOT, 'packages/client/bin/media-marketplace.js'), join(work, 'node_modules', '.bin', 'media-marketplace'));
});
afterAll(async () => {
  await rt?.stop();
  delete process.env.LOCAL_FIXED_OTP;
  if (work) rmSync(work, { recursive: true, force: true });
});

test('the README has runnable walkthroughs for the API, jobs, the sandbox, workers and the CLI', () => {
  const blocks = bashBlocks(README);
  expect(blocks.length).toBeGreaterThanOrEqual(6);
  for (const needle of ['/v1/auth/signup', '/v1/jobs', 'Prefer: wait=60', '/internal/worker/submissions/$SUB/upload', 'npx media-marketplace files download']) {
    expect(blocks.some((b) => b.includes(needle))).toBe(true);
  }
});

async function bash(script: string): Promise<{ code: number | null; out: string }> {
  const child = spawn('bash', ['-c', script], { cwd: work, env: { ...process.env, B: rt.url, OTP: '123456' }, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  child.stdout.on('data', (c: Buffer) => (out += c.toString()));
  child.stderr.on('data', (c: Buffer) => (out += c.toString()));
  const code = await new Promise<number | null>((res) => child.on('close', res));
  return { code, out };
}

test("a refused signup (the email exists, as on a reused data folder) fails in one readable line, not a Node TypeError", async () => {
  const helpers = bashBlocks(README)[0]!;
  const signup = `S=$(api -X POST $B/v1/auth/signup -d '{"name":"Twice","email":"twice-${Date.now()}@example.test"}')`;
  const first = await bash(['set -euo pipefail', helpers, signup, 'echo "$S" | json test_api_key.secret'].join('\n'));
  expect(first.code).toBe(0);
  const again = await bash(['set -euo pipefail', helpers, signup, 'echo "$S" | json test_api_key.secret'].join('\n'));
  expect(again.code).not.toBe(0);
  expect(again.out).toContain('"type":"conflict"');
  expect(again.out).not.toMatch(/TypeError|at Object\.|node:internal/);
  // Without set -e, as pasted into a terminal: the json helper names what it got instead.
  const pasted = await bash([helpers, `echo '{"error":{"type":"conflict","message":"exists"}}' | json test_api_key.secret`].join('\n'));
  expect(pasted.out.trim()).toBe('no test_api_key.secret in: {"error":{"type":"conflict","message":"exists"}}');
});

test("every ```bash block of the README runs as written, in order, against a fresh stack", async () => {
  const script = ['set -euo pipefail', ...bashBlocks(README)].join('\n');
  const child = spawn('bash', ['-c', script], {
    cwd: work,
    env: { ...process.env, B: rt.url, OTP: '123456' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  child.stdout.on('data', (c: Buffer) => (out += c.toString()));
  child.stderr.on('data', (c: Buffer) => (out += c.toString()));
  const code = await new Promise<number | null>((res) => child.on('close', res));
  if (code !== 0) throw new Error(`the README's shell blocks failed (exit ${code}):\n${out.slice(-3000)}`);
  expect(out).toContain('completed: 3 of 3 files');
  expect(out).toContain('first.jpg matches its content_hash');
  expect(out).toMatch(/"skipped":2/); // the second CLI download fetched nothing
}, 300_000);
