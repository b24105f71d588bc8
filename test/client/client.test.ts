/**
 * The typed client (packages/client) against the local stack: a retried call reuses its
 * Idempotency-Key (and the service replays instead of acting twice), lists iterate every item
 * once, waitForJob returns on completion, errors are typed and carry the envelope.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { ConnectionError, Marketplace, NotFoundError, RateLimitError, ValidationError, type ApiKey } from '../../packages/client/src';
import { parallel } from '../../packages/client/src/download';
import { startTestRuntime, type TestRuntime } from '../support/harness';
import { signupBuyer, type TestBuyer } from '../support/buyers';
import { contractFetch } from './support';

let rt: TestRuntime;
let buyer: TestBuyer;
beforeAll(async () => {
  rt = await startTestRuntime({ sandboxDelaySeconds: 0, indexLagMs: 500 });
  buyer = await signupBuyer(rt, 'Client Co');
});
afterAll(async () => {
  await rt?.stop();
});

const jobBody = { type: 'data_collection' as const, description: 'Photos of colourful shapes for the client tests', files_needed: 2, accepted_formats: ['image/jpeg'], price_per_file_cents: 25 };

test('a retried POST reuses its Idempotency-Key: the service replays the first answer and creates one key', async () => {
  const log: { method: string; url: string; headers: Record<string, string> }[] = [];
  const inner = contractFetch(rt.url, log);
  let dropped = 0;
  // The first answer is lost on the way back (after the service acted), like a reset connection.
  const lossy: typeof fetch = async (input, init) => {
    const res = await inner(input, init);
    if (init?.method === 'POST' && dropped++ === 0) throw new TypeError('fetch failed', { cause: { code: 'ECONNRESET' } });
    return res;
  };
  const retries: string[] = [];
  const mm = new Marketplace({ apiKey: buyer.live, baseUrl: rt.url, fetch: lossy, retryBaseMs: 10, onRetry: (r) => retries.push(r.reason) });
  const res = await mm.http.call<ApiKey>('POST', '/v1/api_keys', { body: { name: 'retried', scopes: ['jobs:read'] } });
  expect(res.status).toBe(200);
  expect(res.headers['idempotent-replayed']).toBe('true');
  expect(retries).toEqual(['connection failed']);
  const posts = log.filter((l) => l.method === 'POST');
  expect(posts).toHaveLength(2);
  expect(posts[0]!.headers['idempotency-key']).toBeTruthy();
  expect(posts[1]!.headers['idempotency-key']).toBe(posts[0]!.headers['idempotency-key']);
  const all = await new Marketplace({ apiKey: buyer.live, baseUrl: rt.url }).apiKeys.list().toArray();
  expect(all.filter((k) => k.name === 'retried').map((k) => k.id)).toEqual([res.body.id]);
});

test('two logical calls get two different keys', async () => {
  const log: { method: string; url: string; headers: Record<string, string> }[] = [];
  const mm = new Marketplace({ apiKey: buyer.live, baseUrl: rt.url, fetch: contractFetch(rt.url, log) });
  const a = await mm.apiKeys.create({ name: 'a' });
  const b = await mm.apiKeys.create({ name: 'a' });
  expect(a.id).not.toBe(b.id);
  const keys = log.filter((l) => l.method === 'POST').map((l) => l.headers['idempotency-key']);
  expect(new Set(keys).size).toBe(2);
});

describe('retries against a server speaking the wire format', () => {
  let server: Server;
  let url: string;
  const seen: { key: string | undefined; prefer: string | undefined; at: number }[] = [];
  let script: { status: number; headers?: Record<string, string>; body: unknown }[] = [];
  beforeAll(async () => {
    server = createServer((req, res) => {
      seen.push({ key: req.headers['idempotency-key'] as string | undefined, prefer: req.headers.prefer as string | undefined, at: Date.now() });
      const next = script.shift() ?? { status: 500, body: { error: { type: 'internal_error', message: 'script ran out', request_id: 'req_x' } } };
      res.writeHead(next.status, { 'Content-Type': 'application/json', ...next.headers }).end(JSON.stringify(next.body));
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  afterAll(() => new Promise<void>((r) => server.close(() => r())));
  beforeEach(() => {
    seen.length = 0;
  });
  const err = (type: string, code?: string) => ({ error: { type, message: type, request_id: 'req_1', ...(code ? { details: [{ message: code, code }] } : {}) } });

  test('429 waits at least Retry-After, 409 idempotency_key_in_use and 503 are retried, all with the same key', async () => {
    script = [
      { status: 429, headers: { 'Retry-After': '1' }, body: err('rate_limit_exceeded') },
      { status: 409, headers: { 'Retry-After': '1' }, body: err('conflict', 'idempotency_key_in_use') },
      { status: 503, body: err('internal_error') },
      { status: 201, body: { object: 'job', id: 'job_1' } },
    ];
    const mm = new Marketplace({ apiKey: 'k', baseUrl: url, retryBaseMs: 5, maxRetries: 3 });
    const job = await mm.jobs.create(jobBody);
    expect(job.id).toBe('job_1');
    expect(seen).toHaveLength(4);
    expect(new Set(seen.map((s) => s.key)).size).toBe(1);
    expect(seen[1]!.at - seen[0]!.at).toBeGreaterThanOrEqual(1000);
  });

  test('a 409 idempotency_conflict or a 400 is not retried, and surfaces as a typed error', async () => {
    script = [{ status: 400, body: { error: { type: 'validation_error', message: 'bad', request_id: 'req_2', details: [{ field: 'files_needed', message: 'too small' }] } } }];
    const mm = new Marketplace({ apiKey: 'k', baseUrl: url, retryBaseMs: 5 });
    const e = await mm.jobs.create(jobBody).catch((x: unknown) => x);
    expect(e).toBeInstanceOf(ValidationError);
    expect(e).toMatchObject({ status: 400, type: 'validation_error', requestId: 'req_2', details: [{ field: 'files_needed' }] });
    expect(seen).toHaveLength(1);
  });

  test('a 409 conflict carrying Retry-After (contention; the service freed the key) is retried with the same key', async () => {
    script = [
      { status: 409, headers: { 'Retry-After': '1' }, body: err('conflict', 'transaction_conflict') },
      { status: 201, body: { object: 'job', id: 'job_2' } },
    ];
    const mm = new Marketplace({ apiKey: 'k', baseUrl: url, retryBaseMs: 5 });
    expect((await mm.jobs.create(jobBody)).id).toBe('job_2');
    expect(seen).toHaveLength(2);
    expect(seen[0]!.key).toBe(seen[1]!.key);
  });

  test('a Retry-After longer than a call waits is not retried early: the error says how long to wait', async () => {
    script = [{ status: 429, headers: { 'Retry-After': '3600' }, body: err('rate_limit_exceeded') }];
    const mm = new Marketplace({ apiKey: 'k', baseUrl: url, retryBaseMs: 5, retryMaxMs: 20 });
    const e = await mm.jobs.get('job_1').catch((x: unknown) => x);
    expect(e).toBeInstanceOf(RateLimitError);
    expect((e as RateLimitError).retryAfterSeconds).toBe(3600);
    expect(seen).toHaveLength(1);
  });

  test('waitForJob rides out a long poll refused for capacity (503 with Retry-After), then polls again with a fresh wait', async () => {
    const open = { object: 'job', id: 'job_3', status: 'open' };
    script = [
      { status: 200, body: open },
      { status: 503, headers: { 'Retry-After': '1' }, body: { error: { type: 'service_unavailable', message: 'full', request_id: 'req_3', details: [{ message: 'full', code: 'long_polls_full' }] } } },
      { status: 200, body: { ...open, status: 'completed' } },
    ];
    const mm = new Marketplace({ apiKey: 'k', baseUrl: url, retryBaseMs: 5 });
    const done = await mm.jobs.waitForJob('job_3', { timeoutMs: 30_000 });
    expect(done.status).toBe('completed');
    expect(seen).toHaveLength(3);
    expect(seen[2]!.at - seen[1]!.at).toBeGreaterThanOrEqual(1000);
  });

  test('waitForJob with its own `until` stops when the job ends (it changes no more), instead of polling on', async () => {
    script = [{ status: 200, body: { object: 'job', id: 'job_4', status: 'cancelled' } }];
    const mm = new Marketplace({ apiKey: 'k', baseUrl: url, retryBaseMs: 5 });
    expect((await mm.jobs.waitForJob('job_4', { until: ['filled'], timeoutMs: 30_000 })).status).toBe('cancelled');
    expect(seen).toHaveLength(1);
  });

  test('a fractional timeoutMs or waitSeconds is rounded, not a RangeError retried into ConnectionError', async () => {
    script = [{ status: 200, body: { object: 'job', id: 'job_5', status: 'open' } }];
    const retries: string[] = [];
    const mm = new Marketplace({ apiKey: 'k', baseUrl: url, retryBaseMs: 1, timeoutMs: 1500.5, onRetry: (r) => retries.push(r.reason) });
    expect((await mm.jobs.get('job_5', { waitSeconds: 2.5 })).id).toBe('job_5');
    expect(retries).toEqual([]);
    expect(seen.map((s) => s.prefer)).toEqual(['wait=3']);
  });

  test('a non-finite or negative time-out or wait is an argument error, thrown before anything is sent', async () => {
    expect(() => new Marketplace({ apiKey: 'k', baseUrl: url, timeoutMs: Number.NaN })).toThrow(/timeoutMs must be a finite number/);
    expect(() => new Marketplace({ apiKey: 'k', baseUrl: url, timeoutMs: -1 })).toThrow(RangeError);
    const mm = new Marketplace({ apiKey: 'k', baseUrl: url, retryBaseMs: 1, timeoutMs: undefined });
    for (const waitSeconds of [Number.NaN, Number.POSITIVE_INFINITY, -1]) {
      const e = await mm.jobs.get('job_1', { waitSeconds }).catch((x: unknown) => x);
      expect(e).toBeInstanceOf(RangeError);
      expect(e).not.toBeInstanceOf(ConnectionError);
      expect((e as Error).message).toMatch(/waitSeconds must be a finite number/);
    }
    await expect(mm.jobs.waitForJob('job_1', { timeoutMs: Number.NaN })).rejects.toThrow(/timeoutMs must be a finite number/);
    await expect(mm.exports.wait('exp_1', { timeoutMs: -5 })).rejects.toThrow(RangeError);
    expect(seen).toHaveLength(0);
  });

  test('a DELETE retried after a 5xx that then answers 404 succeeded (the first attempt removed it); a 404 at once is still NotFoundError', async () => {
    script = [
      { status: 503, body: err('internal_error') },
      { status: 404, body: err('not_found') },
    ];
    const mm = new Marketplace({ apiKey: 'k', baseUrl: url, retryBaseMs: 1 });
    await expect(mm.webhookEndpoints.delete('we_1')).resolves.toBeUndefined();
    expect(seen).toHaveLength(2);
    script = [{ status: 404, body: err('not_found') }];
    await expect(mm.webhookEndpoints.delete('we_2')).rejects.toBeInstanceOf(NotFoundError);
    expect(seen).toHaveLength(3);
  });

  test('retries stop after maxRetries and the last error is thrown', async () => {
    script = [500, 502, 503].map((status) => ({ status, body: err('internal_error') }));
    const mm = new Marketplace({ apiKey: 'k', baseUrl: url, retryBaseMs: 1, maxRetries: 2 });
    await expect(mm.jobs.get('job_1')).rejects.toMatchObject({ name: 'InternalError', status: 503 });
    expect(seen).toHaveLength(3);
  });
});

describe('a connection lost while the answer is read', () => {
  let server: Server;
  let url: string;
  const seen: (string | undefined)[] = [];
  let modes: ('cut' | 'stall' | 'ok')[] = [];
  beforeAll(async () => {
    server = createServer((req, res) => {
      seen.push(req.headers['idempotency-key'] as string | undefined);
      const mode = modes.shift() ?? 'cut';
      if (mode === 'ok') {
        res.writeHead(201, { 'Content-Type': 'application/json' }).end(JSON.stringify({ object: 'job', id: 'job_1' }));
        return;
      }
      // The status line, headers and part of the body arrive; then the connection drops (or hangs).
      res.writeHead(201, { 'Content-Type': 'application/json', 'Content-Length': '1000' });
      res.write('{"object":"job","id":"jo');
      if (mode === 'cut') setTimeout(() => res.destroy(), 20);
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  afterAll(() => {
    server.closeAllConnections();
    return new Promise<void>((r) => server.close(() => r()));
  });
  beforeEach(() => {
    seen.length = 0;
  });

  test('a body cut off mid-answer is retried like a lost connection, with the same Idempotency-Key', async () => {
    modes = ['cut', 'ok'];
    const retries: string[] = [];
    const mm = new Marketplace({ apiKey: 'k', baseUrl: url, retryBaseMs: 1, onRetry: (r) => retries.push(r.reason) });
    expect((await mm.jobs.create(jobBody)).id).toBe('job_1');
    expect(retries).toEqual(['connection lost while reading the answer']);
    expect(seen).toHaveLength(2);
    expect(seen[0]).toBeTruthy();
    expect(seen[1]).toBe(seen[0]);
  });

  test('the per-attempt time-out firing while the body is read is retried too', async () => {
    modes = ['stall', 'ok'];
    const retries: string[] = [];
    const mm = new Marketplace({ apiKey: 'k', baseUrl: url, retryBaseMs: 1, timeoutMs: 300, onRetry: (r) => retries.push(r.reason) });
    expect((await mm.jobs.create(jobBody)).id).toBe('job_1');
    expect(retries).toEqual(['connection lost while reading the answer']);
    expect(seen[1]).toBe(seen[0]);
  });

  test('every attempt cut off: a ConnectionError carrying the method, path, status seen and the Idempotency-Key to retry with', async () => {
    modes = ['cut', 'cut', 'cut'];
    const mm = new Marketplace({ apiKey: 'k', baseUrl: url, retryBaseMs: 1, maxRetries: 2 });
    const e = await mm.jobs.create(jobBody).catch((x: unknown) => x);
    expect(e).toBeInstanceOf(ConnectionError);
    expect(seen).toHaveLength(3);
    expect(new Set(seen).size).toBe(1);
    expect(e).toMatchObject({ method: 'POST', path: '/v1/jobs', idempotencyKey: seen[0], answeredStatus: 201, status: 0 });
    expect((e as Error).message).toContain(`Idempotency-Key ${seen[0]}`);
    expect((e as Error).message).toMatch(/^lost the connection to .* while reading the HTTP 201 answer/);
  });
});

test('webhookEndpoints.delete whose answer is lost resolves: the retry\'s 404 means the first attempt deleted it', async () => {
  const plain = new Marketplace({ apiKey: buyer.test, baseUrl: rt.url });
  const ep = await plain.webhookEndpoints.create({ url: 'http://127.0.0.1:9/hooks', events: ['job.completed'] } as never);
  const inner = contractFetch(rt.url);
  let dropped = 0;
  const lossy: typeof fetch = async (input, init) => {
    const res = await inner(input, init);
    if (init?.method === 'DELETE' && dropped++ === 0) throw new TypeError('fetch failed', { cause: { code: 'ECONNRESET' } });
    return res;
  };
  const retries: string[] = [];
  const mm = new Marketplace({ apiKey: buyer.test, baseUrl: rt.url, fetch: lossy, retryBaseMs: 1, onRetry: (r) => retries.push(r.reason) });
  await expect(mm.webhookEndpoints.delete(ep.id)).resolves.toBeUndefined();
  expect(retries).toEqual(['connection failed']);
  await expect(plain.webhookEndpoints.get(ep.id)).rejects.toBeInstanceOf(NotFoundError);
  await expect(plain.webhookEndpoints.delete(ep.id)).rejects.toBeInstanceOf(NotFoundError);
});

test('parallel refuses a concurrency that is not a whole number above 0, instead of running no lanes and resolving', async () => {
  for (const c of [Number.NaN, 0, -1, 1.5]) {
    const done: number[] = [];
    await expect(parallel([1, 2, 3], c, async (n) => void done.push(n))).rejects.toThrow(/concurrency must be a whole number/);
    expect(done).toEqual([]);
  }
  const done: number[] = [];
  await parallel([1, 2, 3], 2, async (n) => void done.push(n));
  expect(done.sort()).toEqual([1, 2, 3]);
});

test('pagination visits every item exactly once, across pages', async () => {
  const b = await signupBuyer(rt, 'Many keys');
  const retries: string[] = [];
  const mm = new Marketplace({ apiKey: b.live, baseUrl: rt.url, fetch: contractFetch(rt.url), onRetry: (r) => retries.push(`${r.reason} ${r.delayMs}`) });
  const created: string[] = [];
  for (let i = 0; i < 23; i++) created.push((await mm.apiKeys.create({ name: `k${i}`, scopes: ['jobs:read'] })).id);
  const pages: number[] = [];
  for await (const page of mm.apiKeys.list({ limit: 10 }).pages()) pages.push(page.data.length);
  expect(pages).toEqual([10, 10, 5]); // 23 + the two signup keys
  const ids = await mm.apiKeys.list({ limit: 10 }).toArray().then((ks) => ks.map((k) => k.id));
  expect(new Set(ids).size).toBe(ids.length);
  expect(ids).toEqual(expect.arrayContaining([...created, b.liveKeyId, b.testKeyId]));
  expect(ids).toHaveLength(25);
  expect(retries).toEqual([]);
});

test('waitForJob long-polls and returns the completed job (sandbox)', async () => {
  const log: { method: string; url: string; headers: Record<string, string> }[] = [];
  const mm = new Marketplace({ apiKey: buyer.test, baseUrl: rt.url, fetch: contractFetch(rt.url, log) });
  const job = await mm.jobs.create(jobBody);
  const done = await mm.jobs.waitForJob(job.id, { timeoutMs: 90_000 });
  expect(done.status).toBe('completed');
  expect(done.files_approved).toBe(2);
  expect(log.filter((l) => l.method === 'GET').some((l) => /^wait=\d+$/.test(l.headers.prefer ?? ''))).toBe(true);
  const files = await mm.jobs.files(job.id).toArray();
  expect(files).toHaveLength(2);
});

test('errors are typed exceptions carrying the envelope', async () => {
  const mm = new Marketplace({ apiKey: buyer.test, baseUrl: rt.url });
  const e = await mm.jobs.get('job_01ARZ3NDEKTSV4RRFFQ69G5FAV').catch((x: unknown) => x);
  expect(e).toBeInstanceOf(NotFoundError);
  expect((e as NotFoundError).envelope?.error.type).toBe('not_found');
  expect((e as NotFoundError).requestId).toMatch(/^req_/);
});
