/**
 * Webhooks on the local runtime (D37): state change → receiver latency and delivery throughput,
 * through the real path: outbox write (a Tx with `emit`) → DynamoDB Local stream → pipe poller →
 * SQS emulator `webhooks` queue → dispatcher → HTTP POST to a local receiver (signed, verified
 * here by nothing: the receiver only timestamps).
 *
 * The local stream poller runs every 100 ms here (the test harness's setting; `npm start` uses
 * 500 ms), which bounds the latency floor; in AWS the stream → Pipes → SQS → Lambda path has its
 * own, different floor. Compare rows of one run.
 */
import { randomBytes } from 'node:crypto';

const N_LATENCY = 100;
const LATENCY_CONCURRENCY = 2;
const N_BURST = 300;
const BURST_CONCURRENCY = 16;

const quantile = (xs: number[], p: number) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.max(0, Math.ceil(p * s.length) - 1))]!;
};

export const name = 'Webhook delivery on the local runtime (outbox → stream → queue → receiver)';

export async function run(): Promise<string> {
  const { startRuntime } = await import('../local/runtime');
  const { startDevReceiver } = await import('../shared/webhooks/dev-receiver');
  const rt = await startRuntime({
    wafRateLimits: false, stageThrottle: false,
    inMemory: true,
    port: 0,
    enableScheduler: false,
    logLevel: 'error',
    cursorSecret: 'bench',
    pollWaitSeconds: 1,
    streamPollIntervalMs: 100,
  });
  const rx = await startDevReceiver();
  try {
    const { Tx } = await import('../shared/db/tx');
    const { emit } = await import('../shared/outbox');
    const signup = await fetch(`${rt.url}/v1/auth/signup`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({ name: 'Bench', email: `bench-${randomBytes(4).toString('hex')}@example.test` }),
    }).then((r) => r.json() as Promise<any>);
    const key = signup.api_key.secret as string;
    const orgId = signup.organization.id as string;
    const ep = await fetch(`${rt.url}/v1/webhook_endpoints`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json', Authorization: `Bearer ${key}`, 'Idempotency-Key': randomBytes(8).toString('hex') },
      body: JSON.stringify({ url: `${rx.url}/bench`, events: ['*'] }),
    });
    if (ep.status !== 201) throw new Error(`endpoint create failed: ${ep.status} ${await ep.text()}`);

    const committedAt = new Map<string, number>();
    const latency: number[] = [];
    const waiters = new Map<string, () => void>();
    rx.onReceive = (r) => {
      const t0 = committedAt.get(r.event.id);
      const done = waiters.get(r.event.id);
      if (t0 === undefined || !done) return; // a duplicate (at least once) counts once
      waiters.delete(r.event.id);
      latency.push(r.receivedAt - t0);
      done();
    };
    const emitOne = async (i: number) => {
      const tx = new Tx();
      const e = emit(tx, { orgId, env: 'live', type: 'job.completed', data: { job_id: `job_${i}`, files_approved: 1, files_needed: 1, total_worker_payout_cents: 80 } });
      const arrived = new Promise<void>((ok) => waiters.set(e.id, ok));
      await tx.commit();
      committedAt.set(e.id, Date.now());
      return { arrived }; // wrapped: an async function would otherwise wait for the arrival
    };
    const pool = async (n: number, c: number, fn: (i: number) => Promise<unknown>) => {
      let next = 0;
      await Promise.all(Array.from({ length: c }, async () => {
        for (let i = next++; i < n; i = next++) await fn(i);
      }));
    };

    // Warm-up (module loads, first stream shard read).
    await pool(5, 1, async (i) => (await emitOne(-1 - i)).arrived);
    latency.length = 0;

    // 1. Latency: a few events in flight at a time, each awaited until it reaches the receiver.
    await pool(N_LATENCY, LATENCY_CONCURRENCY, async (i) => (await emitOne(i)).arrived);
    const lat = [...latency];

    // 2. Throughput: a burst of commits, until the last one is received.
    latency.length = 0;
    const t0 = Date.now();
    const arrivals: Promise<void>[] = [];
    await pool(N_BURST, BURST_CONCURRENCY, async (i) => arrivals.push((await emitOne(10_000 + i)).arrived));
    await Promise.all(arrivals);
    const seconds = (Date.now() - t0) / 1000;
    const burstLat = [...latency];

    const rows = [
      '| Measure | Events | p50 | p99 | Throughput |',
      '|---|---|---|---|---|',
      `| Commit → receiver, ${LATENCY_CONCURRENCY} in flight | ${N_LATENCY} | ${quantile(lat, 0.5)} ms | ${quantile(lat, 0.99)} ms | |`,
      `| Burst of commits (${BURST_CONCURRENCY} writers) → all received | ${N_BURST} | ${quantile(burstLat, 0.5)} ms | ${quantile(burstLat, 0.99)} ms | ${(N_BURST / seconds).toFixed(1)} deliveries/s |`,
    ];
    return [
      'Real path: outbox transaction → DynamoDB Local stream (polled every 100 ms) → `webhooks` queue',
      '(SQS emulator) → dispatcher → signed POST to a local receiver answering 200. Latency is from the',
      'commit returning to the receiver reading the body.',
      '',
      ...rows,
    ].join('\n');
  } finally {
    await rx.close();
    await rt.stop();
  }
}
