/**
 * Issue 11.7: under concurrency every log line carries the request id of its own request. The local
 * runtime runs handlers concurrently in one process, so this is where keys appended by one request
 * could land on another's lines; the logger keeps them per invocation (shared/logger.ts).
 */
import { logger } from '../../shared/logger';
import { signupBuyer } from '../support/buyers';
import { startTestRuntime, type TestRuntime } from '../support/harness';

let rt: TestRuntime;
beforeAll(async () => {
  rt = await startTestRuntime();
});
afterAll(async () => {
  await rt?.stop();
});

type Line = { message?: string; request_id?: string; route?: string; function_name?: string; cold_start?: boolean; [k: string]: unknown };

async function captureLogs<T>(fn: () => Promise<T>): Promise<{ result: T; lines: Line[] }> {
  const chunks: string[] = [];
  const write = process.stdout.write.bind(process.stdout);
  const spy = jest.spyOn(process.stdout, 'write').mockImplementation(((chunk: string | Uint8Array, ...rest: unknown[]) => {
    const text = String(chunk);
    if (text.startsWith('{')) chunks.push(text);
    else return (write as (...a: unknown[]) => boolean)(chunk, ...rest);
    return true;
  }) as typeof process.stdout.write);
  logger.setLogLevel('INFO');
  try {
    const result = await fn();
    return { result, lines: chunks.flatMap((c) => c.split('\n')).filter(Boolean).map((l) => JSON.parse(l) as Line) };
  } finally {
    logger.setLogLevel('SILENT');
    spy.mockRestore();
  }
}

test('forty concurrent requests on three routes: each request-end line carries its own request id and route, each id exactly once', async () => {
  const buyer = await signupBuyer(rt);
  const routes = [
    () => rt.request('GET', '/v1/me', { key: buyer.test }).then((r) => ({ r, route: 'me.get' })),
    () => rt.request('GET', '/v1/jobs', { key: buyer.test }).then((r) => ({ r, route: 'jobs.list' })),
    () => rt.request('GET', '/v1/me', { key: `sk_test_${'x'.repeat(24)}` }).then((r) => ({ r, route: 'me.get' })),
  ];
  const { result: responses, lines } = await captureLogs(() => Promise.all(Array.from({ length: 40 }, (_, i) => routes[i % routes.length]!())));
  expect(new Set(responses.map(({ r }) => r.status))).toEqual(new Set([200, 401]));
  const ends = lines.filter((l) => l.message === 'request' || l.message === 'request refused');
  expect(ends).toHaveLength(responses.length);
  for (const { r, route } of responses) {
    const id = r.headers['x-request-id'];
    expect(id).toMatch(/^req_/);
    const mine = ends.filter((l) => l.request_id === id);
    expect([id, mine.length]).toEqual([id, 1]);
    expect(mine[0]!.route).toBe(route);
  }
});

test('every line of a request carries the Lambda context of its invocation', async () => {
  const { lines } = await captureLogs(() => rt.request('GET', '/v1/me', { key: 'sk_test_not_a_real_key_000000000' }));
  const ends = lines.filter((l) => l.message === 'request refused');
  expect(ends).toHaveLength(1);
  expect(ends[0]!.function_name).toEqual(expect.any(String));
  expect(ends[0]!.function_request_id).toEqual(expect.any(String));
  expect(typeof ends[0]!.cold_start).toBe('boolean');
});
