import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { GetCommand, PutCommand } from '@aws-sdk/lib-dynamodb';
import { createHttpServer } from '../../local/http';
import { invokeWithTimeout, lambdaContext } from '../../local/lambda';
import { silentLog } from '../../local/log';
import { db, tableName } from '../../shared/db/client';
import { runInvocation } from '../../shared/observability/invocation';
import { postWebhook } from '../../shared/webhooks/sender';
import { startTestRuntime, type TestRuntime } from '../support/harness';

// Deployed, Lambda stops a function at its time-out: nothing it would still have done happens. The
// local runtime cannot stop a handler in-process, so it refuses every AWS call the handler makes
// after its time-out (and every webhook POST and Stripe request): a test cannot pass on a write
// that would never happen deployed.
describe('local runtime: a timed-out invocation makes no more AWS calls', () => {
  let rt: TestRuntime;
  beforeAll(async () => {
    rt = await startTestRuntime({ enablePollers: false, enableStreams: false });
  });
  afterAll(async () => {
    await rt?.stop();
  });

  const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
  const item = async (pk: string) => (await db().send(new GetCommand({ TableName: tableName(), Key: { PK: pk, SK: 'X' }, ConsistentRead: true }))).Item;
  /** A handler that waits `ms`, then writes `pk`; `late` receives how its write ended. */
  const writer = (pk: string, ms: number, late: { outcome?: string }) => async () => {
    await sleep(ms);
    try {
      await db().send(new PutCommand({ TableName: tableName(), Item: { PK: pk, SK: 'X' } }));
      late.outcome = 'written';
    } catch (e) {
      late.outcome = (e as Error).name;
    }
    return { statusCode: 200, body: '{}' };
  };

  it('a consumer invocation that outlives its time-out fails, and its later write is refused', async () => {
    const late: { outcome?: string } = {};
    const out = await invokeWithTimeout(writer('STOP#consumer', 300, late), {}, lambdaContext('consumer', 1), 100);
    expect(out).toMatchObject({ timedOut: true });
    await sleep(500);
    expect(late.outcome).toBe('InvocationStopped');
    expect(await item('STOP#consumer')).toBeUndefined();
  });

  it('an invocation within its time-out writes', async () => {
    const done: { outcome?: string } = {};
    expect(await invokeWithTimeout(writer('STOP#in-time', 10, done), {}, lambdaContext('consumer', 1), 1_000)).toHaveProperty('result');
    expect(done.outcome).toBe('written');
    expect(await item('STOP#in-time')).toEqual({ PK: 'STOP#in-time', SK: 'X' });
  });

  it('a route stopped by its function time-out (502) does not write afterwards', async () => {
    const late: { outcome?: string } = {};
    const server = createHttpServer({ log: silentLog, timeouts: { standardMs: 1_500, functionMs: 100, longPollMs: 1_500 }, loadHandler: async () => writer('STOP#route', 300, late) });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
    try {
      const res = await fetch(`http://127.0.0.1:${(server.address() as AddressInfo).port}/v1/me`);
      expect(res.status).toBe(502);
      await sleep(500);
      expect(late.outcome).toBe('InvocationStopped');
      expect(await item('STOP#route')).toBeUndefined();
    } finally {
      await new Promise<void>((r) => {
        server.close(() => r());
        server.closeAllConnections();
      });
    }
  });

  it('a stopped invocation posts no more webhooks: the receiver gets nothing', async () => {
    let received = 0;
    const receiver = createServer((req, res) => {
      received++;
      req.resume();
      res.writeHead(200).end();
    });
    await new Promise<void>((r) => receiver.listen(0, '127.0.0.1', () => r()));
    const url = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/hook`;
    try {
      const post = () => postWebhook(url, '{}', { 'content-type': 'application/json' }, { allowLoopback: true });
      await expect(runInvocation({ fn: 'WebhooksDispatch', stopped: true }, post)).rejects.toMatchObject({ name: 'InvocationStopped' });
      expect(received).toBe(0);
      expect(await runInvocation({ fn: 'WebhooksDispatch', stopped: false }, post)).toMatchObject({ ok: true, statusCode: 200 });
      expect(received).toBe(1);
    } finally {
      await new Promise<void>((r) => receiver.close(() => r()));
    }
  });
});

