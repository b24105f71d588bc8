/**
 * Dataset exports of a 10,000-file job (D73): wall time and peak memory of the build, per format.
 * The Files are seeded directly in the table (as the approval transaction writes them, each with a
 * realistic annotation of 6 detected objects); each export is created through the API and then
 * built in this process by the `exports` consumer's function, streaming to the local S3 as a
 * multipart upload. Memory is sampled every 20 ms during the build (RSS and V8 heap used).
 */
import { randomBytes } from 'node:crypto';

const FILES = 10_000;
const SAMPLE_MS = 20;

const mib = (n: number) => `${(n / 2 ** 20).toFixed(1)} MiB`;

function annotations(i: number) {
  const labels = ['person', 'car', 'bicycle', 'dog', 'traffic light', 'bench'];
  return {
    type: 'image',
    width: 4032,
    height: 3024,
    objects: labels.map((label, k) => ({
      label,
      confidence: 0.5 + ((i + k) % 50) / 100,
      position: 'center',
      approximate_coverage: 0.05,
      bbox: [100 + k * 300, 200 + k * 100, 640.5, 480.25],
    })),
    scene: { setting: 'street', indoor: false, confidence: 0.62 },
    text_extraction: { full_text: `OPEN ${i}`, words: [{ text: 'OPEN', confidence: 0.91 }] },
    color_palette: ['#1a2b3c', '#4d5e6f', '#a0b0c0', '#ffffff', '#000000'],
    composition: 'centered subject: person',
    face_count: 1,
    quality_metrics: { blur_score: 0.12, exposure: 'well_exposed', noise_level: 'low' },
    safety: { nsfw_score: 0.01, violence_score: null, pii_detected: true, pii_types: ['face'], nsfw_classes: { neutral: 0.97 } },
    annotation_model: 'local-annotator/1',
    annotation_provider: 'local',
    unavailable: { violence_score: 'no offline violence model is installed' },
  };
}

export const name = 'Dataset exports of a 10,000-file job';

export async function run(): Promise<string> {
  const { startRuntime } = await import('../local/runtime');
  const rt = await startRuntime({ wafRateLimits: false, stageThrottle: false, inMemory: true, port: 0, enableScheduler: false, enablePollers: false, enableStreams: false, logLevel: 'error', cursorSecret: 'bench' });
  try {
    const { BatchWriteCommand, UpdateCommand } = await import('@aws-sdk/lib-dynamodb');
    const { db, tableName } = await import('../shared/db/client');
    const { keys, gsi } = await import('../shared/db/keys');
    const { idTime, newId } = await import('../shared/ids');
    const { buildExport } = await import('../shared/exports/build');
    const { getExportItem } = await import('../shared/exports/model');

    const req = async (method: string, path: string, key: string | null, body?: unknown, headers: Record<string, string> = {}) => {
      const res = await fetch(`${rt.url}${path}`, {
        method,
        headers: { ...(key ? { Authorization: `Bearer ${key}` } : {}), ...(body ? { 'Content-Type': 'application/json' } : {}), ...headers },
        body: body ? JSON.stringify(body) : undefined,
      });
      const json = (await res.json()) as any;
      if (res.status >= 300) throw new Error(`${method} ${path}: ${res.status} ${JSON.stringify(json)}`);
      return json;
    };
    const s = await req('POST', '/v1/auth/signup', null, { name: 'Bench', email: `bench-${randomBytes(6).toString('hex')}@example.com` });
    const key: string = s.test_api_key.secret;
    const orgId: string = s.organization.id;
    const job = await req('POST', '/v1/jobs', key, { type: 'data_collection', description: 'Benchmark job: a large dataset', files_needed: 10_000, accepted_formats: ['image/jpeg'], price_per_file_cents: 10 }, { 'Idempotency-Key': 'bench-job' });

    // Seed the Files: 25 per BatchWrite, 8 batches in flight.
    const t0 = performance.now();
    const items = Array.from({ length: FILES }, (_, i) => {
      const id = newId('file');
      const sub = newId('submission');
      const createdAt = idTime(id).toISOString(); // the File approved as its id was minted
      return {
        ...keys.file(id),
        ...gsi.file(job.id, id, createdAt),
        entity: 'file',
        id,
        org_id: orgId,
        environment: 'test',
        job_id: job.id,
        submission_id: sub,
        worker_id: 'wkr_01ARZ3NDEKTSV4RRFFQ69G5FAV',
        object_key: `uploads/${sub}/r1/${id}.jpg`,
        original_filename: `IMG_${String(i).padStart(5, '0')}.jpg`,
        content_type: 'image/jpeg',
        size_bytes: 2_500_000 + i,
        duration_seconds: null,
        width: 4032,
        height: 3024,
        content_hash: `sha256:${randomBytes(32).toString('hex')}`,
        captured_at: '2026-11-20T10:00:00.000Z',
        device_info: { device_model: 'Pixel 8', device_os: 'Android 15', app_version: '3.2.1' },
        worker_region: 'US-CA',
        ai_star_rating: 3 + (i % 3),
        annotations: annotations(i),
        keyframes: null,
        created_at: createdAt,
      };
    });
    let next = 0;
    await Promise.all(
      Array.from({ length: 8 }, async () => {
        for (let b = next++; b * 25 < items.length; b = next++) {
          let requests = items.slice(b * 25, b * 25 + 25).map((Item) => ({ PutRequest: { Item } }));
          while (requests.length) {
            const out = await db().send(new BatchWriteCommand({ RequestItems: { [tableName()]: requests } }));
            requests = (out.UnprocessedItems?.[tableName()] ?? []) as typeof requests;
          }
        }
      }),
    );
    // The approvals' count on the job, as their transactions keep it (the build checks its index against it).
    await db().send(new UpdateCommand({ TableName: tableName(), Key: keys.job(job.id), UpdateExpression: 'ADD files_approved :n', ExpressionAttributeValues: { ':n': FILES } }));
    const seedSeconds = (performance.now() - t0) / 1000;

    const rows: string[] = [];
    for (const format of ['jsonl', 'csv', 'coco'] as const) {
      const exp = await req('POST', `/v1/jobs/${job.id}/exports`, key, { format }, { 'Idempotency-Key': `bench-${format}` });
      const base = process.memoryUsage();
      let peakRss = base.rss;
      let peakHeap = base.heapUsed;
      const sampler = setInterval(() => {
        const m = process.memoryUsage();
        peakRss = Math.max(peakRss, m.rss);
        peakHeap = Math.max(peakHeap, m.heapUsed);
      }, SAMPLE_MS);
      const start = performance.now();
      const outcome = await buildExport(exp.id);
      const wall = (performance.now() - start) / 1000;
      clearInterval(sampler);
      const done = (await getExportItem(exp.id))!;
      if (outcome !== 'succeeded') throw new Error(`export ${format}: ${outcome} ${JSON.stringify(done.error)}`);
      rows.push(
        `| ${format} | ${done.file_count} | ${mib(Number(done.size_bytes))} | ${wall.toFixed(1)} s | ${Math.round(Number(done.file_count) / wall)} | ${mib(base.rss)} → ${mib(peakRss)} (+${mib(peakRss - base.rss)}) | ${mib(base.heapUsed)} → ${mib(peakHeap)} (+${mib(peakHeap - base.heapUsed)}) |`,
      );
      console.log(`bench exports: ${rows[rows.length - 1]}`);
    }
    return [
      `${FILES.toLocaleString('en-US')} Files seeded in the table in ${seedSeconds.toFixed(1)} s (each with 6 detected objects; ratings 3–5, so every File is exported). Each export is built by the \`exports\` consumer's function in the benchmark process, streaming to the local S3 (s3rver) as a multipart upload of 5 MiB parts, 2 in flight; memory is sampled every ${SAMPLE_MS} ms during the build (the process also hosts the local stack). JSONL and COCO sign a fresh 7-day URL per File.`,
      '',
      '| Format | Files | Export size | Wall time | Files/s | RSS: before → peak | V8 heap used: before → peak |',
      '|---|---|---|---|---|---|---|',
      ...rows,
    ].join('\n');
  } finally {
    await rt.stop();
  }
}
