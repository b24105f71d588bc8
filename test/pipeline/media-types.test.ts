import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startTestRuntime, waitFor, type TestRuntime } from '../support/harness';
import { accept, createJob, liveBuyer, signupWorker, uploadFile } from './support';

/** Media made with ffmpeg (Debian package) in a temp directory. */
function ffmpegMedia(args: string[], file: string): Buffer {
  const dir = mkdtempSync(join(tmpdir(), 'media-test-'));
  try {
    execFileSync('ffmpeg', ['-hide_banner', '-loglevel', 'error', '-y', ...args, join(dir, file)]);
    return readFileSync(join(dir, file));
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

// Spec "File" fields measured from audio and video bytes; video keyframes (25/50/75 %) with their own URLs.
describe('pipeline: audio and video files carry their measured fields and annotations', () => {
  let rt: TestRuntime;
  beforeAll(async () => {
    process.env.LOCAL_FIXED_OTP = '123456';
    rt = await startTestRuntime();
  });
  afterAll(async () => {
    await rt?.stop();
  });

  const approvedFile = async (buyerKey: string, token: string, jobId: string, subId: string) => {
    const v = await waitFor(
      async () => {
        const r = await rt.request('GET', `/internal/worker/submissions/${subId}`, { key: token });
        return r.json.status !== 'pending_score' ? r.json : null;
      },
      { timeoutMs: 60_000, intervalMs: 700 },
    );
    expect(v.status).toBe('approved');
    const files = await rt.request('GET', `/v1/jobs/${jobId}/files?min_score=1`, { key: buyerKey });
    expect(files.json.data).toHaveLength(1);
    return files.json.data[0];
  };

  it('a WAV recording: duration measured, audio annotations (channels, sample rate, loudness)', async () => {
    const buyer = await liveBuyer(rt);
    const job = await createJob(rt, buyer.live, { files_needed: 1, accepted_formats: ['audio/wav'], price_per_file_cents: 30, max_duration_seconds: 10 });
    const w = await signupWorker(rt);
    const a = await accept(rt, w.token, job.id);
    const wav = ffmpegMedia(['-f', 'lavfi', '-i', 'sine=frequency=440:duration=3'], 'tone.wav');
    expect((await uploadFile(rt, w.token, a.json.id, wav, 'audio/wav', 'tone.wav')).status).toBe(202);
    const f = await approvedFile(buyer.live, w.token, job.id, a.json.id);
    expect(f).toMatchObject({ content_type: 'audio/wav', size_bytes: wav.length, width: null, height: null, keyframes: null });
    expect(f.duration_seconds).toBeCloseTo(3, 1);
    expect(f.annotations).toMatchObject({ type: 'audio', channels: 1, sample_rate: 44100, silent: false });
  });

  it('an MP4 video: dimensions and duration measured, three keyframes with fresh URLs', async () => {
    const buyer = await liveBuyer(rt);
    const job = await createJob(rt, buyer.live, { files_needed: 1, accepted_formats: ['video/mp4'], price_per_file_cents: 50, max_duration_seconds: 10 });
    const w = await signupWorker(rt);
    const a = await accept(rt, w.token, job.id);
    const mp4 = ffmpegMedia(
      ['-f', 'lavfi', '-i', 'testsrc=size=640x480:rate=25:duration=2', '-c:v', 'libx264', '-pix_fmt', 'yuv420p', '-movflags', '+faststart'],
      'clip.mp4',
    );
    expect((await uploadFile(rt, w.token, a.json.id, mp4, 'video/mp4', 'clip.mp4')).status).toBe(202);
    const f = await approvedFile(buyer.live, w.token, job.id, a.json.id);
    expect(f).toMatchObject({ content_type: 'video/mp4', width: 640, height: 480 });
    expect(f.duration_seconds).toBeCloseTo(2, 1);
    expect(f.annotations).toMatchObject({ type: 'video', width: 640, height: 480, fps: 25 });
    expect(f.keyframes.map((k: any) => k.index)).toEqual([0, 1, 2]);
    expect(f.keyframes[1].timestamp_seconds).toBeCloseTo(1, 1);
    const png = await fetch(f.keyframes[0].download_url);
    expect(png.status).toBe(200);
    expect(Buffer.from(await png.arrayBuffer()).subarray(1, 4).toString()).toBe('PNG');
  });
});
