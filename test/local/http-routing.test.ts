import { registerLocalPage } from '../../local/http';
import { startTestRuntime, type TestRuntime } from '../support/harness';

// D4: unknown routes answer the error envelope with a request id in X-Request-Id.
describe('the local API routes through the manifest', () => {
  let rt: TestRuntime;

  beforeAll(async () => {
    rt = await startTestRuntime({ enablePollers: false, enableStreams: false });
  });

  afterAll(async () => {
    await rt?.stop();
  });

  it('an unknown route answers 404 not_found in the error envelope, with X-Request-Id', async () => {
    const res = await rt.request('GET', '/v1/no-such-thing');
    expect(res.status).toBe(404);
    expect(res.json).toEqual({ error: { type: 'not_found', message: expect.any(String), request_id: expect.stringMatching(/^req_[0-9A-Z]{26}$/) } });
    expect(res.headers['x-request-id']).toBe(res.json.error.request_id);
  });

  it('a known path with another method also answers the 404 envelope', async () => {
    const res = await rt.request('DELETE', '/v1/jobs');
    expect(res.status).toBe(404);
    expect(res.json.error.type).toBe('not_found');
  });

  it('a body over 10 MB answers 413 in the error envelope, as API Gateway refuses it', async () => {
    const res = await rt.request('POST', '/v1/auth/signup', { body: Buffer.alloc(10 * 1024 * 1024 + 1, 0x61), headers: { 'Content-Type': 'application/json' } });
    expect(res.status).toBe(413);
    expect(res.json.error.type).toBe('invalid_request');
  });

  it('a registered local-only page answers before the API routes', async () => {
    const unregister = registerLocalPage((req, res) => {
      if (req.url !== '/local/ping') return false;
      res.writeHead(200, { 'Content-Type': 'text/plain' }).end('pong');
      return true;
    });
    try {
      const res = await rt.request('GET', '/local/ping');
      expect(res).toMatchObject({ status: 200, text: 'pong' });
    } finally {
      unregister();
    }
    expect((await rt.request('GET', '/local/ping')).status).toBe(404);
  });
});
