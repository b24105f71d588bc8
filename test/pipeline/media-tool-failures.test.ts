import { execFileSync } from 'node:child_process';
import { chmodSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startTestRuntime, waitFor, type TestRuntime } from '../support/harness';
import { accept, createJob, liveBuyer, signupWorker, uploadFile, waitForVerdict } from './support';

// D66 applied to media: a tool that cannot finish (killed, missing, the disk full) says nothing
// about the bytes. The stage fails, its message comes back with backoff, and the file gets its
// verdict and its annotations once the tool runs again; it is never rejected as unreadable, nor
// stored with annotations null for good.
describe('pipeline: a media tool that fails is retried, never taken for undecodable bytes', () => {
  let rt: TestRuntime;
  let dir: string;
  let mp4: Buffer;
  beforeAll(async () => {
    process.env.LOCAL_FIXED_OTP = '123456';
    process.env.PIPELINE_RETRY_BASE_SECONDS = '1';
    process.env.PIPELINE_RETRY_MAX_SECONDS = '1';
    dir = mkdtempSync(join(tmpdir(), 'media-tool-'));
    execFileSync('ffmpeg', ['-hide_banner', '-loglevel', 'error', '-y', '-f', 'lavfi', '-i', 'testsrc=size=640x480:rate=25:duration=2', '-c:v', 'libx264', '-pix_fmt', 'yuv420p', '-movflags', '+faststart', join(dir, 'clip.mp4')]);
    mp4 = readFileSync(join(dir, 'clip.mp4'));
    rt = await startTestRuntime();
  });
  afterEach(() => {
    delete process.env.FFPROBE_PATH;
    delete process.env.FFMPEG_PATH;
  });
  afterAll(async () => {
    delete process.env.PIPELINE_RETRY_BASE_SECONDS;
    delete process.env.PIPELINE_RETRY_MAX_SECONDS;
    await rt?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  /** A stand-in for the tool that counts its runs and is killed at once (as the out-of-memory killer does). */
  function killedTool(name: string): { path: string; runs: () => number } {
    const path = join(dir, name);
    writeFileSync(path, `#!/bin/sh\necho run >> "$0.runs"\nkill -KILL $$\n`);
    chmodSync(path, 0o755);
    return { path, runs: () => readFileSync(`${path}.runs`, 'utf8').split('\n').filter(Boolean).length };
  }
  const runsOf = (t: { runs: () => number }) => {
    try {
      return t.runs();
    } catch {
      return 0;
    }
  };

  async function uploadVideo() {
    const buyer = await liveBuyer(rt);
    const job = await createJob(rt, buyer.live, { files_needed: 1, accepted_formats: ['video/mp4'], price_per_file_cents: 50, max_duration_seconds: 10 });
    const w = await signupWorker(rt);
    const a = await accept(rt, w.token, job.id);
    const up = await uploadFile(rt, w.token, a.json.id, mp4, 'video/mp4', 'clip.mp4');
    expect(up.status).toBe(202);
    return { buyer, job, w, subId: a.json.id as string };
  }
  const status = async (token: string, subId: string) => (await rt.request('GET', `/internal/worker/submissions/${subId}`, { key: token })).json.status;

  it('scoring: a killed ffprobe keeps the submission pending_score, and the retry approves it', async () => {
    const probe = killedTool('ffprobe');
    process.env.FFPROBE_PATH = probe.path;
    const { buyer, job, w, subId } = await uploadVideo();
    await waitFor(() => runsOf(probe) >= 3, { timeoutMs: 60_000, intervalMs: 200 });
    expect(await status(w.token, subId)).toBe('pending_score');
    delete process.env.FFPROBE_PATH;
    expect(await waitForVerdict(rt, w.token, subId)).toMatchObject({ status: 'approved', reason_codes: [] });
    const files = await rt.request('GET', `/v1/jobs/${job.id}/files?min_score=1`, { key: buyer.live });
    expect(files.json.data[0]).toMatchObject({ width: 640, height: 480 });
  });

  it('annotation: a killed ffmpeg leaves no File without keyframes; the retry stores them', async () => {
    const ffmpeg = killedTool('ffmpeg');
    process.env.FFMPEG_PATH = ffmpeg.path;
    const { buyer, job, w, subId } = await uploadVideo();
    await waitFor(() => runsOf(ffmpeg) >= 3, { timeoutMs: 60_000, intervalMs: 200 });
    expect(await status(w.token, subId)).toBe('pending_score');
    delete process.env.FFMPEG_PATH;
    expect(await waitForVerdict(rt, w.token, subId)).toMatchObject({ status: 'approved' });
    const files = await rt.request('GET', `/v1/jobs/${job.id}/files?min_score=1`, { key: buyer.live });
    const f = files.json.data[0];
    expect(f.annotations).toMatchObject({ type: 'video', width: 640, height: 480 });
    expect(f.keyframes.map((k: { index: number }) => k.index)).toEqual([0, 1, 2]);
  });
});
