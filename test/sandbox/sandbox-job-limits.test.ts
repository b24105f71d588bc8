/**
 * D40: a test-key job completes whatever its limits, as long as some file can meet them: when the
 * shipped samples (12 s long, at most 1600×1200) miss the job's D26 pre-checks, the simulated
 * workers upload a sample derived to fit (looped or cut, scaled up), real media with real
 * annotations, each upload's bytes still unique (D53).
 */
import { createHash } from 'node:crypto';
import { startTestRuntime, type TestRuntime } from '../support/harness';
import { signupBuyer, idemKey } from '../support/buyers';

let rt: TestRuntime;
beforeAll(async () => {
  process.env.SANDBOX_DELAY_SECONDS = '1';
  rt = await startTestRuntime({ indexLagMs: 500 });
});
afterAll(async () => {
  await rt?.stop();
  delete process.env.SANDBOX_DELAY_SECONDS;
});

async function completedTestJob(limits: Record<string, unknown>, price: number): Promise<{ key: string; jobId: string; job: Record<string, any> }> {
  const buyer = await signupBuyer(rt, 'Sandbox Limits');
  const r = await rt.request('POST', '/v1/jobs', {
    key: buyer.test,
    headers: { 'Idempotency-Key': idemKey() },
    body: { type: 'data_collection', title: 'Sandbox limits', description: 'Media for a sandbox test of the job limits', files_needed: 2, price_per_file_cents: price, ...limits },
  });
  expect(r.status).toBe(201);
  const deadline = Date.now() + 120_000;
  for (;;) {
    const j = await rt.request('GET', `/v1/jobs/${r.json.id}`, { key: buyer.test, headers: { Prefer: 'wait=20' } });
    if (j.json.status === 'completed') return { key: buyer.test, jobId: r.json.id, job: j.json };
    if (Date.now() > deadline) {
      const subs = await rt.request('GET', `/v1/jobs/${r.json.id}/submissions?limit=100`, { key: buyer.test });
      throw new Error(`job still ${j.json.status}: ${subs.json.data.map((s: { status: string; ai_reasoning: string }) => `${s.status} (${s.ai_reasoning})`).join('; ')}`);
    }
  }
}

async function filesOf(key: string, jobId: string): Promise<Record<string, any>[]> {
  const r = await rt.request('GET', `/v1/jobs/${jobId}/files`, { key });
  expect(r.status).toBe(200);
  const hashes = new Set<string>();
  for (const f of r.json.data) {
    const bytes = Buffer.from(await (await fetch(f.download_url)).arrayBuffer());
    expect(`sha256:${createHash('sha256').update(bytes).digest('hex')}`).toBe(f.content_hash);
    hashes.add(f.content_hash);
  }
  expect(hashes.size).toBe(r.json.data.length); // D53: unique bytes
  return r.json.data;
}

test('a test video job whose min_duration_seconds is above the samples\' 12 s completes: its uploads are looped to length (D40)', async () => {
  const { key, jobId, job } = await completedTestJob({ accepted_formats: ['video/mp4'], min_duration_seconds: 30 }, 50);
  expect(job).toMatchObject({ status: 'completed', files_approved: 2 });
  for (const f of await filesOf(key, jobId)) {
    expect(f.duration_seconds).toBeGreaterThanOrEqual(30);
    expect(f.annotations).toMatchObject({ type: 'video' });
  }
}, 180_000);

test('a test image job whose min_width and min_height are above the samples\' 1600×1200 completes: its uploads are scaled up (D40)', async () => {
  const { key, jobId, job } = await completedTestJob({ accepted_formats: ['image/jpeg'], min_width: 2400, min_height: 1800 }, 25);
  expect(job).toMatchObject({ status: 'completed', files_approved: 2 });
  for (const f of await filesOf(key, jobId)) {
    expect(f).toMatchObject({ width: 2400, height: 1800 });
    expect(f.annotations).toMatchObject({ type: 'image' });
    expect(f.annotations.color_palette.length).toBeGreaterThan(0);
  }
}, 180_000);

test('a test audio job whose max_duration_seconds is below the samples\' 12 s completes: its uploads are cut to length (D40)', async () => {
  const { key, jobId, job } = await completedTestJob({ accepted_formats: ['audio/mpeg'], max_duration_seconds: 5 }, 25);
  expect(job).toMatchObject({ status: 'completed', files_approved: 2 });
  for (const f of await filesOf(key, jobId)) {
    expect(f.duration_seconds).toBeLessThanOrEqual(5);
    expect(f.annotations).toMatchObject({ type: 'audio' });
  }
}, 180_000);

test('a tool that cannot run is no fact about the job\'s limits: deriving the sample fails (the message is retried) instead of uploading one the pre-checks reject', async () => {
  const { sampleMediaFor } = await import('../../shared/sandbox/samples');
  const { isMachineryFailure } = await import('../../shared/media/failures');
  const before = process.env.FFMPEG_PATH;
  process.env.FFMPEG_PATH = '/nonexistent/ffmpeg';
  try {
    const err = await sampleMediaFor({ accepted_formats: ['audio/mpeg'], max_duration_seconds: 7 }).then(() => null, (e: unknown) => e);
    expect(isMachineryFailure(err)).toBe(true);
  } finally {
    if (before === undefined) delete process.env.FFMPEG_PATH;
    else process.env.FFMPEG_PATH = before;
  }
});
