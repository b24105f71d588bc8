/**
 * The deployed edge's own answers, locally (D4, D61, D12): what API Gateway and its web ACL answer
 * without a route's function, the local front answers the same way (shared/http/edge.ts), and a
 * request no route takes runs the not-found function, as the ANY methods route it deployed
 * (lib/api.ts). Nothing here may hold locally and fail deployed: no X-Request-Id where the deployed
 * edge cannot send one, and no 400 where the web ACL answers 403 first.
 */
import type { AddressInfo } from 'node:net';
import type { Server } from 'node:http';
import { createHttpServer } from '../../local/http';
import { buildProxyEvent } from '../../local/proxy-integration';
import { lambdaContext, loadHandler } from '../../local/lambda';
import { silentLog } from '../../local/log';
import { UNKNOWN_ROUTE } from '../../shared/manifest/routes';
import { GATEWAY_RESPONSES, MAX_QUERY_STRING_BYTES, MAX_URI_PATH_BYTES, STAGE_NAME, wafBody, type GatewayResponseDef } from '../../shared/http/edge';
import { bodyTooLarge } from '../../shared/http/body-limits';
import { CURSOR_MAX_CHARS } from '../../shared/http/schemas';
import { binding, encodeCursor } from '../../shared/cursor';
import { startTestRuntime, type TestRuntime } from '../support/harness';
import { signupBuyer, type TestBuyer } from '../support/buyers';

const ULID_REQUEST_ID = /^req_[0-9A-HJKMNP-TV-Z]{26}$/;
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;

type Answer = { status: number; headers: Record<string, string>; text: string; json: any };

async function send(base: string, method: string, path: string, init: { headers?: Record<string, string>; body?: string | Buffer } = {}): Promise<Answer> {
  const res = await fetch(`${base}${path}`, { method, headers: init.headers, body: init.body });
  const text = await res.text();
  let json: any = null;
  try {
    json = JSON.parse(text);
  } catch {
    json = null;
  }
  return { status: res.status, headers: Object.fromEntries(res.headers), text, json };
}

/** D4: the not-found function's 404, its request id in the body and in X-Request-Id. */
function expectNotFound(r: Answer, method: string, path: string) {
  expect([method, path, r.status]).toEqual([method, path, 404]);
  expect(r.json).toEqual({ error: { type: 'not_found', message: `No such route: ${method} ${path}`, request_id: expect.stringMatching(ULID_REQUEST_ID) } });
  expect(r.headers['x-request-id']).toBe(r.json.error.request_id);
}

/** A gateway response as API Gateway answers it: its request id in the body only (x-amzn-RequestId beside), no X-Request-Id. */
function expectGatewayAnswer(r: Answer, status: number, def: GatewayResponseDef) {
  expect(r.status).toBe(status);
  expect(r.headers['content-type']).toMatch(/^application\/json/);
  expect(r.headers['x-request-id']).toBeUndefined();
  expect(r.headers['x-amzn-requestid']).toMatch(UUID);
  expect(r.json).toEqual({ error: { type: def.type, message: def.message, request_id: `req_${r.headers['x-amzn-requestid']}` } });
}

describe('D4: a request no route takes runs the not-found function, as the ANY methods do deployed', () => {
  let server: Server;
  let base: string;
  const loaded: string[] = [];
  let behaviour: 'ok' | 'throw' | 'no-status' = 'ok';

  beforeAll(async () => {
    server = createHttpServer({
      log: silentLog,
      timeouts: { standardMs: 5_000, functionMs: 5_000, longPollMs: 5_000 },
      loadHandler: async (modulePath) => {
        loaded.push(modulePath);
        if (modulePath === UNKNOWN_ROUTE.handler) return loadHandler(modulePath);
        return async () => {
          if (behaviour === 'throw') throw new Error('the function crashed');
          if (behaviour === 'no-status') return { body: '{}' };
          return { statusCode: 200, headers: { 'Content-Type': 'application/json' }, body: '{"ok":true}' };
        };
      },
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  afterAll(async () => {
    await new Promise<void>((r) => {
      server.close(() => r());
      server.closeAllConnections();
    });
  });
  beforeEach(() => {
    loaded.length = 0;
    behaviour = 'ok';
  });

  it('D4: an unknown path is the not-found function\'s 404 not_found, X-Request-Id req_<ULID> equal to error.request_id', async () => {
    const r = await send(base, 'GET', '/v1/no-such-thing');
    expectNotFound(r, 'GET', '/v1/no-such-thing');
    expect(loaded).toEqual([UNKNOWN_ROUTE.handler]);
    // As a Lambda proxy integration answers: API Gateway's own id beside the function's.
    expect(r.headers['x-amzn-requestid']).toMatch(UUID);
  });

  it('D4: a method its path does not declare is the same 404 from the not-found function (an explicit method wins over ANY)', async () => {
    for (const [method, path] of [
      ['DELETE', '/v1/jobs'],
      ['POST', '/v1/me'],
      ['PUT', '/v1/jobs/job_01ARZ3NDEKTSV4RRFFQ69G5FAV'],
      ['PATCH', '/v1/submissions/summary'],
    ] as const) {
      loaded.length = 0;
      expectNotFound(await send(base, method, path), method, path);
      expect(loaded).toEqual([UNKNOWN_ROUTE.handler]);
    }
    // A declared method still reaches its route's function.
    expect((await send(base, 'GET', '/v1/jobs')).json).toEqual({ ok: true });
  });

  it('D4: the root, a path under no resource, a query string or a body on an unknown route: still the 404 (the not-found function validates nothing)', async () => {
    expectNotFound(await send(base, 'GET', '/'), 'GET', '/');
    expectNotFound(await send(base, 'GET', '/v1/jobs/job_01ARZ3NDEKTSV4RRFFQ69G5FAV/nothing/deeper'), 'GET', '/v1/jobs/job_01ARZ3NDEKTSV4RRFFQ69G5FAV/nothing/deeper');
    const r = await send(base, 'POST', '/v1/nope?colour=red', { headers: { 'Content-Type': 'application/json' }, body: '{"a":1}' });
    expectNotFound(r, 'POST', '/v1/nope');
  });

  it('a function that throws is the Default5xx gateway response (502): API Gateway\'s request id, no X-Request-Id', async () => {
    behaviour = 'throw';
    const r = await send(base, 'GET', '/v1/me');
    expectGatewayAnswer(r, 502, GATEWAY_RESPONSES.default5xx);
    expect(r.json.error.message).toBe('Internal error.');
  });

  it('a function that answers no status code is the same Default5xx gateway response (502)', async () => {
    behaviour = 'no-status';
    expectGatewayAnswer(await send(base, 'GET', '/v1/me'), 502, GATEWAY_RESPONSES.default5xx);
  });
});

describe('D4 deployed: the not-found function answers an ANY method\'s event', () => {
  it('D4: its 404 carries X-Request-Id equal to error.request_id (a gateway response could not), for any method and resource', async () => {
    const handler = await loadHandler(UNKNOWN_ROUTE.handler);
    for (const [method, path, resource] of [
      ['DELETE', '/v1/jobs', '/v1/jobs'],
      ['GET', '/v1/nothing/here', '/{proxy+}'],
    ] as const) {
      const event = buildProxyEvent({ method, url: `${path}?x=1`, rawHeaders: ['Host', 'api.example.com'], body: Buffer.from('{"x":1}'), sourceIp: '203.0.113.9', port: 443 }, { path: resource }, {});
      const result = (await handler(event, lambdaContext('UnknownRouteFunction', 5))) as { statusCode: number; headers: Record<string, string>; body: string };
      const body = JSON.parse(result.body);
      expect(result.statusCode).toBe(404);
      expect(body).toEqual({ error: { type: 'not_found', message: `No such route: ${method} ${path}`, request_id: expect.stringMatching(ULID_REQUEST_ID) } });
      expect(result.headers['X-Request-Id']).toBe(body.error.request_id);
      expect(result.headers['Content-Type']).toBe('application/json');
    }
  });
});

describe('the web ACL before API Gateway: its size rules, locally', () => {
  let rt: TestRuntime;
  let buyer: TestBuyer;

  beforeAll(async () => {
    rt = await startTestRuntime({ enablePollers: false, enableStreams: false });
    buyer = await signupBuyer(rt, 'Edge');
  });
  afterAll(async () => {
    await rt?.stop();
  });

  /** `path?name=xxx…` whose query string is exactly `bytes` long. */
  const withQuery = (path: string, bytes: number, name = 'colour') => `${path}?${name}=${'x'.repeat(bytes - name.length - 1)}`;

  it('WAF SizeRestrictions_QUERYSTRING: a query string over 2,048 bytes is the WafBlocked gateway response (403), on a route or not', async () => {
    const auth = { Authorization: `Bearer ${buyer.live}` };
    expectGatewayAnswer(await send(rt.url, 'GET', withQuery('/v1/api_keys', MAX_QUERY_STRING_BYTES + 1), { headers: auth }), 403, GATEWAY_RESPONSES.wafBlocked);
    // The web ACL answers before API Gateway routes: an unknown route gets the 403 too.
    expectGatewayAnswer(await send(rt.url, 'GET', withQuery('/v1/nothing-here', MAX_QUERY_STRING_BYTES + 1)), 403, GATEWAY_RESPONSES.wafBlocked);
    // At 2,048 bytes the request goes on: the route's own answer (an unknown parameter).
    const atLimit = await send(rt.url, 'GET', withQuery('/v1/api_keys', MAX_QUERY_STRING_BYTES), { headers: auth });
    expect(atLimit.status).toBe(400);
    expect(atLimit.json.error.details[0]).toMatchObject({ field: 'colour', code: 'unknown_field' });
    expect(atLimit.headers['x-request-id']).toBe(atLimit.json.error.request_id);
  });

  it('WAF scope-down: the core rules skip the upload routes, so a long query string there reaches API Gateway', async () => {
    const r = await send(rt.url, 'POST', withQuery('/internal/worker/submissions/sub_01ARZ3NDEKTSV4RRFFQ69G5FAV/upload', 3000));
    expect(r.status).toBe(401); // the upload route's own answer: no worker token
    expect(r.headers['x-request-id']).toBe(r.json.error.request_id);
  });

  it('WAF SizeRestrictions_URIPATH: a URI path over 1,024 bytes (the stage counted) is the WafBlocked gateway response (403)', async () => {
    const idOfPath = (bytes: number) => 'j'.repeat(bytes - `/${STAGE_NAME}/v1/jobs/`.length);
    const over = await send(rt.url, 'GET', `/v1/jobs/${idOfPath(MAX_URI_PATH_BYTES + 1)}`, { headers: { Authorization: `Bearer ${buyer.live}` } });
    expectGatewayAnswer(over, 403, GATEWAY_RESPONSES.wafBlocked);
    const atLimit = await send(rt.url, 'GET', `/v1/jobs/${idOfPath(MAX_URI_PATH_BYTES)}`, { headers: { Authorization: `Bearer ${buyer.live}` } });
    expect(atLimit.status).toBe(404); // the route's answer: a malformed id
    expect(atLimit.headers['x-request-id']).toBe(atLimit.json.error.request_id);
  });

  it('D61, web ACL first: a body over 4 MiB to an unknown route is the web ACL\'s 413 (no request id, no X-Request-Id), not the 404', async () => {
    const r = await send(rt.url, 'POST', '/v1/nothing-here', { headers: { 'Content-Type': 'application/json' }, body: Buffer.alloc(4 * 1024 * 1024 + 1, 0x20) });
    expect(r.status).toBe(413);
    expect(r.text).toBe(wafBody(bodyTooLarge()));
    expect(r.headers['x-request-id']).toBeUndefined();
  });

  it('D12 under the web ACL: the longest cursor the service writes, with every other parameter of its list at its longest, fits in 2,048 bytes', async () => {
    // The submissions list writes the longest cursors: its binding holds every filter, and the
    // cursor carries the date range its first page resolved (shared/work/queries.ts).
    const id = (prefix: string) => `${prefix}_01ARZ3NDEKTSV4RRFFQ69G5FAV`;
    const date = '2026-01-01T00:00:00.123456789+05:30';
    const jobId = 'j'.repeat(40); // the filter's longest value
    const params = { limit: '100', job_id: jobId, status: 'retry_pending', min_score: '5', start_date: date, end_date: date };
    const sent = binding({ what: 'submissions', org: id('org'), env: 'live', job_id: jobId, status: 'retry_pending', min_score: 5, start_date: date, end_date: date });
    const position = { PK: `SUB#${id('sub')}`, SK: 'SUB', GSI1PK: `JOB#${jobId}#SUBS`, GSI1SK: id('sub') };
    const cursor = await encodeCursor({ k: position, start: new Date().toISOString(), end: new Date().toISOString() }, sent);
    expect(cursor.length).toBeLessThanOrEqual(CURSOR_MAX_CHARS);
    // Every other parameter percent-encoded as a client sends it, and the longest cursor allowed.
    const query = new URLSearchParams({ ...params, cursor: 'c'.repeat(CURSOR_MAX_CHARS) }).toString();
    expect(Buffer.byteLength(query)).toBeLessThanOrEqual(MAX_QUERY_STRING_BYTES);
  });
});
