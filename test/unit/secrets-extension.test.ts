/**
 * Deployed, shared/secrets reads secrets from the AWS Parameters and Secrets Lambda Extension
 * (D63; issue 15: no Secrets Manager client in the bundle): GET /secretsmanager/get?secretId=<ARN>
 * on localhost:$PARAMETERS_SECRETS_EXTENSION_HTTP_PORT, with the function's session token in
 * X-Aws-Parameters-Secrets-Token, answering GetSecretValue's JSON. A local HTTP server stands in
 * for the extension, answering in that published format.
 */
import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';

const ARN = 'arn:aws:secretsmanager:eu-west-1:123456789012:secret:cursor-AbCdEf';

interface Extension {
  requests: { url: string; token: string | undefined }[];
  answer: { status: number; body: string };
  close: () => Promise<void>;
  port: number;
}

async function extension(): Promise<Extension> {
  const ext = { requests: [], answer: { status: 200, body: '' } } as unknown as Extension;
  const server: Server = createServer((req: IncomingMessage, res) => {
    ext.requests.push({ url: req.url ?? '', token: req.headers['x-aws-parameters-secrets-token'] as string | undefined });
    res.writeHead(ext.answer.status, { 'content-type': 'application/json' }).end(ext.answer.body);
  });
  await new Promise<void>((r) => server.listen(0, 'localhost', r));
  ext.port = (server.address() as AddressInfo).port;
  ext.close = () => new Promise((r) => server.close(() => r()));
  return ext;
}

const getSecretValueAnswer = (secret: Record<string, unknown>) =>
  JSON.stringify({ ARN, Name: 'cursor', VersionId: 'a1b2c3d4-5678-90ab-cdef-EXAMPLE11111', VersionStages: ['AWSCURRENT'], CreatedDate: '2026-11-25T12:00:00.000Z', ...secret });

let ext: Extension;
const saved = { ...process.env };
let secrets: typeof import('../../shared/secrets');

beforeEach(async () => {
  ext = await extension();
  Object.assign(process.env, { AWS_LAMBDA_FUNCTION_NAME: 'fn', AWS_SESSION_TOKEN: 'session-token-of-the-function', PARAMETERS_SECRETS_EXTENSION_HTTP_PORT: String(ext.port), SECRET_ARN_CURSOR: ARN });
  delete process.env.RUNTIME;
  jest.isolateModules(() => {
    secrets = require('../../shared/secrets') as typeof import('../../shared/secrets');
  });
});

afterEach(async () => {
  await ext.close();
  process.env = { ...saved };
});

test('deployed, a secret is read from the extension by its ARN, authenticated by the session token', async () => {
  ext.answer = { status: 200, body: getSecretValueAnswer({ SecretString: 'the-cursor-key' }) };
  await expect(secrets.getSecret('cursor')).resolves.toBe('the-cursor-key');
  expect(ext.requests).toEqual([{ url: `/secretsmanager/get?secretId=${encodeURIComponent(ARN)}`, token: 'session-token-of-the-function' }]);
});

test('deployed, a value is reused for a minute without asking the extension again', async () => {
  ext.answer = { status: 200, body: getSecretValueAnswer({ SecretString: 'the-cursor-key' }) };
  await secrets.getSecret('cursor');
  ext.answer = { status: 200, body: getSecretValueAnswer({ SecretString: 'rotated' }) };
  await expect(secrets.getSecret('cursor')).resolves.toBe('the-cursor-key');
  expect(ext.requests).toHaveLength(1);
});

test.each([
  ['an error answer of the extension', { status: 400, body: 'not ready to serve traffic' }, /answered 400: not ready/],
  ['a binary secret', { status: 200, body: getSecretValueAnswer({ SecretBinary: 'AAEC' }) }, /empty or binary/],
  ['an answer that is not JSON', { status: 200, body: '<html>' }, /not JSON/],
])('deployed, %s is a SecretUnavailableError, never an empty key', async (_what, answer, message) => {
  ext.answer = answer;
  const e = await secrets.getSecret('cursor').catch((x: Error) => x);
  expect(e).toBeInstanceOf(secrets.SecretUnavailableError);
  expect((e as Error).message).toMatch(message);
});

test('deployed, an extension that is not there is a SecretUnavailableError', async () => {
  await ext.close();
  const e = await secrets.getSecret('cursor').catch((x: Error) => x);
  expect(e).toBeInstanceOf(secrets.SecretUnavailableError);
  expect((e as Error).message).toMatch(/did not answer/);
  ext.close = async () => undefined;
});

test('a function not granted the secret gets a SecretUnavailableError without asking the extension', async () => {
  delete process.env.SECRET_ARN_CURSOR;
  await expect(secrets.getSecret('cursor')).rejects.toThrow(/SECRET_ARN_CURSOR is not set/);
  expect(ext.requests).toHaveLength(0);
});
