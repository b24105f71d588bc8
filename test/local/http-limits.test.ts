import { connect } from 'node:net';
import type { AddressInfo } from 'node:net';
import type { Server } from 'node:http';
import { ListObjectsV2Command, S3Client } from '@aws-sdk/client-s3';
import { createHttpServer, LAMBDA_PAYLOAD_BYTES, MAX_BODY_BYTES } from '../../local/http';
import { buildProxyEvent } from '../../local/proxy-integration';
import { lambdaContext, loadHandler } from '../../local/lambda';
import { silentLog } from '../../local/log';
import { MAX_MULTIPART_BODY_BYTES, multipartTooLarge } from '../../shared/work/upload-limits';
import { bodyTooLarge } from '../../shared/http/body-limits';
import { GATEWAY_RESPONSES, wafBody, type GatewayResponseDef } from '../../shared/http/edge';
import type { ApiError } from '../../shared/errors';
import { DEFAULT_TIMEOUTS, requestBudget } from '../../local/http-limits';
import { ROUTE_FUNCTION_TIMEOUT_SECONDS } from '../../shared/manifest/timeouts';
import { startTestRuntime, type TestRuntime } from '../support/harness';
import { accept, createJob, liveBuyer, multipart, signupWorker } from '../pipeline/support';

/** Sends raw bytes and returns everything the server answers until it closes. */
function rawExchange(port: number, request: string | Buffer, opts: { endAfterWrite?: boolean } = {}): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1');
    const chunks: Buffer[] = [];
    socket.on('data', (c) => chunks.push(c));
    socket.on('end', () => resolve(Buffer.concat(chunks).toString('latin1')));
    socket.on('error', reject);
    socket.write(request, () => opts.endAfterWrite && socket.end());
  });
}

/** Status, headers (lower case) and JSON body of a raw HTTP/1.1 answer. */
function parseRaw(raw: string) {
  const [head, ...rest] = raw.split('\r\n\r\n');
  const [statusLine, ...lines] = head!.split('\r\n');
  const headers = Object.fromEntries(lines.map((l) => [l.slice(0, l.indexOf(':')).toLowerCase(), l.slice(l.indexOf(':') + 1).trim()]));
  return { status: Number(statusLine!.split(' ')[1]), headers, json: JSON.parse(rest.join('\r\n')) };
}

function expectEnvelope(r: { status: number; headers: Record<string, string>; json: any }, status: number, type = 'invalid_request') {
  expect(r.status).toBe(status);
  expect(r.headers['content-type']).toMatch(/^application\/json/);
  expect(r.headers['x-request-id']).toMatch(/^req_[0-9A-HJKMNP-TV-Z]{26}$/);
  expect(r.json.error).toMatchObject({ type, message: expect.any(String), request_id: r.headers['x-request-id'] });
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;

/**
 * A gateway response as API Gateway answers it (shared/http/edge.ts, lib/api.ts): its message and
 * API Gateway's request id (`req_<uuid>`, the uuid in x-amzn-RequestId), and no X-Request-Id, which
 * a gateway response cannot send. These used to be asserted as envelopes with a `req_<ULID>` in
 * X-Request-Id, which only the local front gave: a client relying on it would fail deployed.
 */
function expectGatewayAnswer(r: { status: number; headers: Record<string, string>; json: any }, status: number, def: GatewayResponseDef) {
  expect(r.status).toBe(status);
  expect(r.headers['content-type']).toMatch(/^application\/json/);
  expect(r.headers['x-request-id']).toBeUndefined();
  expect(r.headers['x-amzn-requestid']).toMatch(UUID);
  expect(r.json).toEqual({ error: { type: def.type, message: def.message, request_id: `req_${r.headers['x-amzn-requestid']}` } });
}

/**
 * The web ACL's 413 (BodyOver4MiB, MultipartBodyOver4MiB): its fixed body, which holds no request
 * id, and no X-Request-Id. Asserted before as an envelope with an X-Request-Id, which only the local
 * front gave.
 */
function expectWafAnswer(r: { status: number; headers: Record<string, string>; json: any }, e: ApiError) {
  expect(r.status).toBe(413);
  expect(r.headers['content-type']).toMatch(/^application\/json/);
  expect(r.headers['x-request-id']).toBeUndefined();
  expect(r.json).toEqual(JSON.parse(wafBody(e)));
  expect(r.json.error.request_id).toBeUndefined();
}

// A route's function times out (28 s) before API Gateway's integration (29 s): deployed, the
// function is stopped and API Gateway answers 502, so locally no request may run longer either.
describe('local HTTP front: the function time-out ends a request before the integration time-out', () => {
  it('the local budgets are the deployed ones: the function 28 s (502) before the integration 29 s; a 60 s long poll\'s function 63 s (502) before its integration 64 s', () => {
    expect(DEFAULT_TIMEOUTS).toEqual({ standardMs: 29_000, functionMs: ROUTE_FUNCTION_TIMEOUT_SECONDS * 1000, longPollMs: 63_000 });
    expect(requestBudget(DEFAULT_TIMEOUTS, false)).toEqual({ ms: 28_000, status: 502 });
    expect(requestBudget(DEFAULT_TIMEOUTS, true)).toEqual({ ms: 63_000, status: 502 });
  });

  it("API Gateway's 29 s counts a cold start, the function's 28 s does not: after a 3 s init, the gateway's clock ends first (504)", () => {
    expect(requestBudget(DEFAULT_TIMEOUTS, false, 500)).toEqual({ ms: 28_000, status: 502 });
    expect(requestBudget(DEFAULT_TIMEOUTS, false, 3_000)).toEqual({ ms: 26_000, status: 504 });
  });

  it('a function slow to load and then to answer meets the integration time-out (504), though each part is within its own limit', async () => {
    const server = createHttpServer({
      log: silentLog,
      timeouts: { standardMs: 900, functionMs: 700, longPollMs: 1_500 },
      loadHandler: async () => {
        await new Promise((r) => setTimeout(r, 500)); // init
        return async () => {
          await new Promise((r) => setTimeout(r, 600)); // within the function's 700 ms
          return { statusCode: 200, body: '{}' };
        };
      },
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
    try {
      const res = await fetch(`http://127.0.0.1:${(server.address() as AddressInfo).port}/v1/me`);
      expectGatewayAnswer({ status: res.status, headers: Object.fromEntries(res.headers), json: await res.json() }, 504, GATEWAY_RESPONSES.integrationTimeout);
    } finally {
      await new Promise<void>((r) => {
        server.close(() => r());
        server.closeAllConnections();
      });
    }
  });

  it('a handler slower than its function time-out is the Default5xx gateway response (502) at that time-out', async () => {
    const server = createHttpServer({
      log: silentLog,
      timeouts: { standardMs: 1_500, functionMs: 300, longPollMs: 1_500 },
      loadHandler: async () => async () => {
        await new Promise((r) => setTimeout(r, 2_000));
        return { statusCode: 200, body: '{}' };
      },
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
    try {
      const started = Date.now();
      const res = await fetch(`http://127.0.0.1:${(server.address() as AddressInfo).port}/v1/me`);
      expectGatewayAnswer({ status: res.status, headers: Object.fromEntries(res.headers), json: await res.json() }, 502, GATEWAY_RESPONSES.default5xx);
      expect(Date.now() - started).toBeLessThan(1_400);
    } finally {
      await new Promise<void>((r) => {
        server.close(() => r());
        server.closeAllConnections();
      });
    }
  });
});

// The local HTTP front answers as API Gateway + Lambda would deployed (D61), each answer readable
// (issue 11.5): the front's own answers (431, 400) in the error envelope with X-Request-Id, the
// deployed edge's (502, 504, 413) as that edge gives them. A fake handler stands in where the
// limit is about the function's behaviour (slow, oversized response).
describe('local HTTP front: the integration limits of API Gateway and Lambda', () => {
  let server: Server;
  let port: number;
  let behaviour: 'slow' | 'huge' | 'ok' = 'ok';

  beforeAll(async () => {
    server = createHttpServer({
      log: silentLog,
      timeouts: { standardMs: 300, longPollMs: 600 },
      loadHandler: async () => async () => {
        if (behaviour === 'slow') await new Promise((r) => setTimeout(r, 2_000));
        const body = behaviour === 'huge' ? JSON.stringify({ data: 'x'.repeat(LAMBDA_PAYLOAD_BYTES) }) : '{"ok":true}';
        return { statusCode: 200, headers: { 'Content-Type': 'application/json', 'X-Request-Id': 'req_fake' }, body };
      },
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
    port = (server.address() as AddressInfo).port;
  });
  afterAll(async () => {
    await new Promise<void>((r) => {
      server.close(() => r());
      server.closeAllConnections();
    });
  });

  const get = async (path = '/v1/me') => {
    const res = await fetch(`http://127.0.0.1:${port}${path}`);
    return { status: res.status, headers: Object.fromEntries(res.headers), json: (await res.json()) as any };
  };

  it('a handler that answers in time is passed through', async () => {
    behaviour = 'ok';
    expect((await get()).json).toEqual({ ok: true });
  });

  it('a handler slower than the integration time-out is the IntegrationTimeout gateway response (504)', async () => {
    behaviour = 'slow';
    const started = Date.now();
    const r = await get();
    expectGatewayAnswer(r, 504, GATEWAY_RESPONSES.integrationTimeout);
    expect(Date.now() - started).toBeLessThan(1_900);
  });

  it('a response above Lambda’s 6 MB is the Default5xx gateway response (502), as API Gateway answers', async () => {
    behaviour = 'huge';
    expectGatewayAnswer(await get(), 502, GATEWAY_RESPONSES.default5xx);
  });

  it('request headers above 10 KiB are a 431 envelope, not a bare status line', async () => {
    const raw = await rawExchange(port, `GET /v1/me HTTP/1.1\r\nHost: x\r\nX-Filler: ${'a'.repeat(12 * 1024)}\r\n\r\n`);
    expectEnvelope(parseRaw(raw), 431);
  });

  it('a request that is not HTTP is a 400 envelope', async () => {
    const raw = await rawExchange(port, 'NOT HTTP AT ALL\r\n\r\n');
    expectEnvelope(parseRaw(raw), 400);
  });

  it('Expect: 100-continue with an oversized Content-Length is refused before the body is sent, with the web ACL\'s 413', async () => {
    const raw = await rawExchange(
      port,
      `POST /v1/jobs HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ${MAX_BODY_BYTES + 1}\r\nExpect: 100-continue\r\n\r\n`,
    );
    const r = parseRaw(raw);
    expectWafAnswer(r, bodyTooLarge());
    expect(r.json.error.details[0].code).toBe('body_too_large');
  });
});

describe('local HTTP front: request size limits on the real routes', () => {
  let rt: TestRuntime;
  let s3: S3Client;

  beforeAll(async () => {
    process.env.LOCAL_FIXED_OTP = '123456';
    rt = await startTestRuntime({ enablePollers: false, enableStreams: false });
    s3 = new S3Client({ endpoint: rt.s3Endpoint, forcePathStyle: true, region: 'us-east-1', credentials: { accessKeyId: 'local', secretAccessKey: 'local' } });
  });
  afterAll(async () => {
    s3?.destroy();
    await rt?.stop();
  });

  /** A worker holding an accepted submission of a fresh job. */
  async function acceptedSubmission() {
    const buyer = await liveBuyer(rt);
    const job = await createJob(rt, buyer.live, { files_needed: 1 });
    const w = await signupWorker(rt);
    const a = await accept(rt, w.token, job.id);
    expect(a.status).toBe(201);
    return { token: w.token, subId: a.json.id as string };
  }

  /** A multipart body of exactly `total` bytes (one file). */
  function multipartOf(total: number) {
    const probe = multipart([{ filename: 'big.jpg', contentType: 'image/jpeg', data: Buffer.alloc(0) }]);
    const boundary = probe.contentType.split('boundary=')[1]!;
    const head = `--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="big.jpg"\r\nContent-Type: image/jpeg\r\n\r\n`;
    const tail = `\r\n--${boundary}--\r\n`;
    const data = Buffer.alloc(total - head.length - tail.length, 0xab);
    data[0] = 0xff;
    data[1] = 0xd8;
    data[2] = 0xff;
    return { body: Buffer.concat([Buffer.from(head), data, Buffer.from(tail)]), contentType: probe.contentType };
  }

  async function nothingStored(subId: string, token: string) {
    const objects = await s3.send(new ListObjectsV2Command({ Bucket: rt.bucketName, Prefix: `uploads/${subId}/` }));
    expect(objects.KeyCount ?? 0).toBe(0);
    const sub = await rt.request('GET', `/internal/worker/submissions/${subId}`, { key: token });
    expect(sub.json.status).toBe('awaiting_upload');
  }

  it('a multipart body above 4 MiB is the web ACL\'s 413 use_presigned_upload, and nothing is stored', async () => {
    const { token, subId } = await acceptedSubmission();
    const m = multipartOf(MAX_MULTIPART_BODY_BYTES + 1);
    // The web ACL's body is not the documented Error (no request_id): no contract check.
    const r = await rt.request('POST', `/internal/worker/submissions/${subId}/upload`, { key: token, body: m.body, headers: { 'Content-Type': m.contentType } });
    expectWafAnswer(r, multipartTooLarge());
    expect(r.json.error.details[0].code).toBe('use_presigned_upload');
    await nothingStored(subId, token);
  });

  it('a streamed multipart body (no Content-Length) above 4 MiB is refused the same way', async () => {
    const { token, subId } = await acceptedSubmission();
    const m = multipartOf(MAX_MULTIPART_BODY_BYTES + 100_000);
    const stream = new ReadableStream({
      start(controller) {
        for (let i = 0; i < m.body.length; i += 256 * 1024) controller.enqueue(m.body.subarray(i, i + 256 * 1024));
        controller.close();
      },
    });
    const res = await fetch(`${rt.url}/internal/worker/submissions/${subId}/upload`, {
      method: 'POST',
      headers: { Authorization: `Bearer ${token}`, 'Content-Type': m.contentType },
      body: stream,
      duplex: 'half',
    } as RequestInit);
    const r = { status: res.status, headers: Object.fromEntries(res.headers), json: (await res.json()) as any };
    // Deployed the web ACL sees no Content-Length here; the front refuses it all the same, with its answer.
    expectWafAnswer(r, multipartTooLarge());
    expect(r.json.error.details[0].code).toBe('use_presigned_upload');
    await nothingStored(subId, token);
  });

  it('a multipart body of exactly 4 MiB reaches the handler (its checks answer, not the size limit)', async () => {
    const { token, subId } = await acceptedSubmission();
    const m = multipartOf(MAX_MULTIPART_BODY_BYTES);
    const r = await rt.request('POST', `/internal/worker/submissions/${subId}/upload`, { key: token, body: m.body, headers: { 'Content-Type': m.contentType } });
    expect(r.status).not.toBe(413);
    expect(r.status).toBeLessThan(500);
  });

  it('deployed, the upload function itself refuses a multipart body above 4 MiB (413 use_presigned_upload)', async () => {
    const { token, subId } = await acceptedSubmission();
    const m = multipartOf(MAX_MULTIPART_BODY_BYTES + 1);
    const path = `/internal/worker/submissions/${subId}/upload`;
    const event = buildProxyEvent(
      { method: 'POST', url: path, rawHeaders: ['Authorization', `Bearer ${token}`, 'Content-Type', m.contentType, 'Host', '127.0.0.1'], body: m.body, sourceIp: '127.0.0.1', port: 0 },
      { path: '/internal/worker/submissions/{submission_id}/upload' },
      { submission_id: subId },
    );
    const handler = await loadHandler('functions/worker/submission-upload.ts');
    const result = (await handler(event, lambdaContext('WorkerSubmissionsUpload', 29))) as { statusCode: number; body: string };
    expect(result.statusCode).toBe(413);
    expect(JSON.parse(result.body).error).toMatchObject({ type: 'invalid_request', details: [expect.objectContaining({ code: 'use_presigned_upload' })] });
    await nothingStored(subId, token);
  });

  it('D61: a JSON body above 4 MiB is the web ACL\'s readable 413 body_too_large, not a connection reset', async () => {
    const res = await fetch(`${rt.url}/v1/jobs`, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: `{"x":"${'a'.repeat(MAX_BODY_BYTES)}"}` });
    const r = { status: res.status, headers: Object.fromEntries(res.headers), json: (await res.json()) as any };
    expectWafAnswer(r, bodyTooLarge());
    expect(r.json.error.details[0].code).toBe('body_too_large');
  });

  it('a binary body above 4 MiB (over 6 MB once base64-encoded, which Lambda would refuse) is the same 413 body_too_large', async () => {
    const body = Buffer.alloc(5 * 1024 * 1024, 1);
    const res = await fetch(`${rt.url}/v1/jobs`, { method: 'POST', headers: { 'Content-Type': 'application/octet-stream' }, body });
    const r = { status: res.status, headers: Object.fromEntries(res.headers), json: (await res.json()) as any };
    expectWafAnswer(r, bodyTooLarge());
    expect(r.json.error.details[0].code).toBe('body_too_large');
  });

  it('a binary body of exactly 4 MiB reaches the function: base64-encoded it fits Lambda\'s 6 MB', async () => {
    const res = await fetch(`${rt.url}/v1/jobs`, { method: 'POST', headers: { 'Content-Type': 'application/octet-stream' }, body: Buffer.alloc(MAX_BODY_BYTES, 0x20) });
    expect(res.status).not.toBe(413);
    expect(res.status).toBeLessThan(500);
  });
});
