import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { routeById } from '../../shared/manifest/routes';
import { buildProxyEvent, writeProxyResult, type ProxyRequest } from '../../local/proxy-integration';
import { lambdaContext, loadHandler } from '../../local/lambda';

const request = (over: Partial<ProxyRequest> = {}): ProxyRequest => ({
  method: 'GET',
  url: '/v1/jobs/job_01J/files',
  rawHeaders: ['Host', '127.0.0.1:3000', 'Authorization', 'Bearer k', 'User-Agent', 'curl/8', 'Accept', 'a', 'accept', 'b'],
  body: Buffer.alloc(0),
  sourceIp: '127.0.0.1',
  port: 3000,
  ...over,
});

describe('the HTTP adapter builds the API Gateway REST proxy event', () => {
  const route = routeById('jobs.files.list');
  const now = new Date('2026-11-21T12:00:00.000Z');

  it('carries resource, path, path parameters, headers in original case and the request context', () => {
    const event = buildProxyEvent(request(), route, { job_id: 'job_01J' }, { now, requestId: 'rid-1' });
    expect(event).toMatchObject({
      resource: '/v1/jobs/{job_id}/files',
      path: '/v1/jobs/job_01J/files',
      httpMethod: 'GET',
      pathParameters: { job_id: 'job_01J' },
      queryStringParameters: null,
      multiValueQueryStringParameters: null,
      stageVariables: null,
      body: null,
      isBase64Encoded: false,
      requestContext: {
        accountId: '000000000000',
        httpMethod: 'GET',
        path: '/local/v1/jobs/job_01J/files',
        stage: 'local',
        requestId: 'rid-1',
        requestTimeEpoch: now.getTime(),
        requestTime: '21/Nov/2026:12:00:00 +0000',
        resourcePath: '/v1/jobs/{job_id}/files',
        identity: { sourceIp: '127.0.0.1', userAgent: 'curl/8', apiKey: null },
      },
    });
    expect(event.headers).toMatchObject({ Host: '127.0.0.1:3000', Authorization: 'Bearer k', Accept: 'b', 'X-Forwarded-For': '127.0.0.1' });
    expect(event.multiValueHeaders).toMatchObject({ Accept: ['a', 'b'], Authorization: ['Bearer k'] });
  });

  it('gives query parameters single (last value) and multi-valued, and null path parameters when none', () => {
    const event = buildProxyEvent(request({ url: '/v1/jobs?limit=10&status=open&status=completed&q=a%20b' }), routeById('jobs.list'), {});
    expect(event.queryStringParameters).toEqual({ limit: '10', status: 'completed', q: 'a b' });
    expect(event.multiValueQueryStringParameters).toEqual({ limit: ['10'], status: ['open', 'completed'], q: ['a b'] });
    expect(event.pathParameters).toBeNull();
  });

  it('splits a query string at an unencoded semicolon, as API Gateway does; an encoded one stays in its value', () => {
    const event = buildProxyEvent(request({ url: '/v1/audit-events?event_type=a;b=c&q=x%3By' }), routeById('jobs.list'), {});
    expect(event.multiValueQueryStringParameters).toEqual({ event_type: ['a'], b: ['c'], q: ['x;y'] });
  });

  it('passes JSON bodies as text and multipart bodies base64-encoded', () => {
    const json = buildProxyEvent(request({ method: 'POST', body: Buffer.from('{"a":1}'), rawHeaders: ['Content-Type', 'application/json'] }), route, {});
    expect(json).toMatchObject({ body: '{"a":1}', isBase64Encoded: false });

    const bytes = Buffer.from([0xff, 0xd8, 0x00, 0x10]);
    const multipart = buildProxyEvent(request({ method: 'POST', body: bytes, rawHeaders: ['Content-Type', 'multipart/form-data; boundary=x'] }), route, {});
    expect(multipart).toMatchObject({ body: bytes.toString('base64'), isBase64Encoded: true });
  });

  it('base64-encodes exactly the API binary media types: media and octet streams, not a type outside the list, which API Gateway hands over as text', () => {
    const bytes = Buffer.from([0x25, 0x50, 0x44, 0x46]);
    for (const type of ['image/jpeg', 'audio/mp4', 'video/quicktime', 'application/octet-stream', 'IMAGE/PNG; q=1']) {
      expect(buildProxyEvent(request({ method: 'POST', body: bytes, rawHeaders: ['Content-Type', type] }), route, {})).toMatchObject({ isBase64Encoded: true });
    }
    for (const type of ['application/pdf', 'application/zip', 'text/csv', 'application/xml']) {
      expect(buildProxyEvent(request({ method: 'POST', body: bytes, rawHeaders: ['Content-Type', type] }), route, {})).toMatchObject({ body: bytes.toString('utf8'), isBase64Encoded: false });
    }
  });

  it("decodes a base64 response only when the client's first Accept value is a binary media type, as API Gateway does", async () => {
    const png = Buffer.from([0x89, 0x50, 0x4e, 0x47]);
    const server: Server = createServer((req, res) => writeProxyResult(res, { statusCode: 200, headers: { 'Content-Type': 'image/png' }, body: png.toString('base64'), isBase64Encoded: true }, 'rid', req.headers.accept));
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    try {
      const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/`;
      expect(Buffer.from(await (await fetch(url, { headers: { Accept: 'image/png' } })).arrayBuffer())).toEqual(png);
      expect(await (await fetch(url, { headers: { Accept: 'application/json, image/png' } })).text()).toBe(png.toString('base64'));
    } finally {
      await new Promise((r) => server.close(r));
    }
  });

  it("writes the handler's result: status, headers, multi-value headers and body", async () => {
    const handler = await loadHandler('test/local/fixtures/echo-handler.ts');
    const server: Server = createServer(async (req, res) => {
      const event = buildProxyEvent(request(), route, { job_id: 'job_01J' });
      const result = (await handler(event, lambdaContext('JobsFilesList', 29))) as Parameters<typeof writeProxyResult>[1];
      writeProxyResult(res, result, 'rid-2');
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    try {
      const res = await fetch(`http://127.0.0.1:${(server.address() as AddressInfo).port}/`);
      expect(res.status).toBe(200);
      expect(res.headers.get('x-request-id')).toBe('req_FIXTURE');
      expect(res.headers.get('set-cookie')).toBe('a=1, b=2');
      const body = (await res.json()) as { event: { resource: string }; functionName: string; remaining: number };
      expect(body.event.resource).toBe('/v1/jobs/{job_id}/files');
      expect(body.functionName).toBe('JobsFilesList');
      expect(body.remaining).toBeGreaterThan(28_000);
    } finally {
      server.close();
    }
  });
});
