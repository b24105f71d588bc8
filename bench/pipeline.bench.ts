/**
 * Upload → verdict through the local pipeline (D54): worker accept + multipart upload over HTTP,
 * S3 (s3rver) → EventBridge rule → scoring and annotation queues (fauxqs) → the two consumers
 * with the `local` scorer → the fan-in verdict (approval transaction with the ledger). Latency is
 * measured from the start of the upload request to the first worker poll (every 50 ms) that
 * shows the verdict; throughput is submissions decided per minute with CONCURRENCY workers
 * uploading at once. Images: distinct 640×480 JPEGs (detailed, ~30 KB), generated before the clock starts.
 */
import { randomBytes } from 'node:crypto';
import { UpdateCommand } from '@aws-sdk/lib-dynamodb';

const N = 40;
const CONCURRENCY = 6;
const POLL_MS = 50;

export const name = 'Pipeline: upload → verdict on the local runtime (local scorer)';

export async function run(): Promise<string> {
  const { startRuntime } = await import('../local/runtime');
  const rt = await startRuntime({ inMemory: true, port: 0, enableScheduler: false, enablePollers: true, enableStreams: false, logLevel: 'error', cursorSecret: 'bench', pollWaitSeconds: 1 });
  try {
    const { db, tableName } = await import('../shared/db/client');
    const { keys } = await import('../shared/db/keys');
    const { confirmCheckout } = await import('../shared/billing');
    const { detailedJpeg, multipart } = await import('../test/pipeline/support');

    const call = async (method: string, path: string, key: string | null, body?: unknown, headers: Record<string, string> = {}) => {
      const isBuf = Buffer.isBuffer(body);
      const res = await fetch(`${rt.url}${path}`, {
        method,
        headers: { ...(key ? { Authorization: `Bearer ${key}` } : {}), ...(body && !isBuf ? { 'Content-Type': 'application/json' } : {}), ...headers },
        body: body === undefined ? undefined : isBuf ? (body as Buffer) : JSON.stringify(body),
      });
      const json = (await res.json()) as any;
      if (res.status >= 300) throw new Error(`${method} ${path}: ${res.status} ${JSON.stringify(json)}`);
      return json;
    };
    const s = await call('POST', '/v1/auth/signup', null, { name: 'Bench', email: `bench-${randomBytes(6).toString('hex')}@example.com` });
    const key: string = s.api_key.secret;
    await db().send(new UpdateCommand({ TableName: tableName(), Key: keys.organization(s.organization.id), UpdateExpression: 'SET rate_limits = :l', ExpressionAttributeValues: { ':l': { perMinute: 1e6, perHour: 1e7 } } }));
    const cs = await call('POST', '/v1/billing/credits/purchase', key, { amount_cents: 10_000 }, { 'Idempotency-Key': 'bench-purchase' });
    await confirmCheckout(cs.id, { paymentMethod: 'pm_bench', providerRef: cs.id });
    const job = await call('POST', '/v1/jobs', key, { type: 'data_collection', description: 'Benchmark: photos of storefronts', files_needed: N + 2, accepted_formats: ['image/jpeg'], price_per_file_cents: 10 }, { 'Idempotency-Key': 'bench-job' });

    const workers = await Promise.all(Array.from({ length: N + 2 }, async (_, i) => (await call('POST', '/internal/worker/auth/signup', null, { name: `W${i}`, email: `w-${i}-${randomBytes(4).toString('hex')}@example.com` })).token as string));
    const images = await Promise.all(Array.from({ length: N + 2 }, (_, i) => detailedJpeg(10_000 + i)));

    const one = async (i: number) => {
      const token = workers[i]!;
      const sub = await call('POST', `/internal/worker/jobs/${job.id}/accept`, token);
      const m = multipart([{ filename: `p${i}.jpg`, contentType: 'image/jpeg', data: images[i]! }]);
      const t0 = performance.now();
      await call('POST', `/internal/worker/submissions/${sub.id}/upload`, token, m.body, { 'Content-Type': m.contentType });
      const uploadMs = performance.now() - t0;
      for (;;) {
        const v = await call('GET', `/internal/worker/submissions/${sub.id}`, token);
        if (v.status !== 'pending_score') return { ms: performance.now() - t0, uploadMs, status: v.status as string };
        await new Promise((r) => setTimeout(r, POLL_MS));
      }
    };
    await one(N); // warm-up: loads the consumer modules, sharp, the region data
    await one(N + 1);

    const lat: number[] = [];
    const up: number[] = [];
    const statuses: Record<string, number> = {};
    let next = 0;
    const t0 = performance.now();
    await Promise.all(
      Array.from({ length: CONCURRENCY }, async () => {
        for (let i = next++; i < N; i = next++) {
          const r = await one(i);
          lat.push(r.ms);
          up.push(r.uploadMs);
          statuses[r.status] = (statuses[r.status] ?? 0) + 1;
        }
      }),
    );
    const wall = performance.now() - t0;
    const q = (xs: number[], p: number) => [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.ceil(p * xs.length) - 1)]!;
    const f = (x: number) => `${Math.round(x)} ms`;
    return [
      `${N} submissions, ${CONCURRENCY} workers uploading at once, 640×480 JPEG (~${Math.round(images[0]!.length / 1024)} KB), verdicts: ${Object.entries(statuses).map(([k, v]) => `${v} ${k}`).join(', ')}.`,
      '',
      '| measure | p50 | p99 |',
      '|---|---|---|',
      `| upload request (multipart → 202) | ${f(q(up, 0.5))} | ${f(q(up, 0.99))} |`,
      `| upload start → verdict visible | ${f(q(lat, 0.5))} | ${f(q(lat, 0.99))} |`,
      '',
      `Throughput: ${((N / wall) * 60_000).toFixed(0)} submissions per minute (wall ${(wall / 1000).toFixed(1)} s). Locally the queue pollers take one batch at a time per queue (scoring 5, annotation 2, the wiring's batch sizes), so the annotation stage bounds throughput; deployed, Lambda runs batches in parallel.`,
    ].join('\n');
  } finally {
    await rt.stop();
  }
}
