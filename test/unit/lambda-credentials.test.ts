/**
 * The credential chain of the deployed bundles (shared/aws/lambda-credentials.ts, put in place of
 * the SDK's @aws-sdk/credential-provider-node by the house bundling; issue 15, cold start): the
 * environment Lambda sets, then a container credentials endpoint, nothing else. The container
 * endpoint is a local HTTP server answering in the published container credentials format; the
 * client that signs with the chain is the real DynamoDB client, talking to a local server that
 * records what it was sent.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DynamoDBClient, ListTablesCommand } from '@aws-sdk/client-dynamodb';
import { defaultProvider } from '../../shared/aws/lambda-credentials';

const saved = { ...process.env };
const CREDENTIAL_VARIABLES = [
  'AWS_ACCESS_KEY_ID',
  'AWS_SECRET_ACCESS_KEY',
  'AWS_SESSION_TOKEN',
  'AWS_CREDENTIAL_EXPIRATION',
  'AWS_PROFILE',
  'AWS_SHARED_CREDENTIALS_FILE',
  'AWS_CONFIG_FILE',
  'AWS_CONTAINER_CREDENTIALS_FULL_URI',
  'AWS_CONTAINER_CREDENTIALS_RELATIVE_URI',
  'AWS_CONTAINER_AUTHORIZATION_TOKEN',
  'AWS_WEB_IDENTITY_TOKEN_FILE',
  'AWS_ROLE_ARN',
];
const servers: Server[] = [];

beforeEach(() => {
  for (const k of CREDENTIAL_VARIABLES) delete process.env[k];
});

afterEach(async () => {
  process.env = { ...saved };
  await Promise.all(servers.splice(0).map((s) => new Promise((r) => s.close(r))));
});

/** A local HTTP server; `answer` decides each response. Resolves with its base URL and the requests it saw. */
async function server(answer: (url: string, headers: IncomingHttpHeaders) => { status: number; body: string }) {
  const seen: { url: string; headers: IncomingHttpHeaders }[] = [];
  const s = createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      seen.push({ url: req.url ?? '', headers: req.headers });
      const a = answer(req.url ?? '', req.headers);
      res.writeHead(a.status, { 'content-type': 'application/json' }).end(a.body);
    });
  });
  servers.push(s);
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
  return { url: `http://127.0.0.1:${(s.address() as AddressInfo).port}`, seen };
}

const lambdaEnvironment = (suffix = '') =>
  Object.assign(process.env, {
    AWS_ACCESS_KEY_ID: `ASIAEXAMPLE${suffix}`,
    AWS_SECRET_ACCESS_KEY: `secret${suffix}`,
    AWS_SESSION_TOKEN: `session-token${suffix}`,
  });

test('the execution role’s credentials are read from the environment Lambda sets', async () => {
  lambdaEnvironment();
  await expect(defaultProvider()()).resolves.toMatchObject({ accessKeyId: 'ASIAEXAMPLE', secretAccessKey: 'secret', sessionToken: 'session-token' });
});

test('credentials without an expiry are read once and kept', async () => {
  lambdaEnvironment();
  const provider = defaultProvider();
  await provider();
  lambdaEnvironment('-later');
  await expect(provider()).resolves.toMatchObject({ accessKeyId: 'ASIAEXAMPLE' });
});

test('credentials that expire within five minutes are read again', async () => {
  lambdaEnvironment();
  process.env.AWS_CREDENTIAL_EXPIRATION = new Date(Date.now() + 60_000).toISOString();
  const provider = defaultProvider();
  await provider();
  lambdaEnvironment('-renewed');
  process.env.AWS_CREDENTIAL_EXPIRATION = new Date(Date.now() + 3_600_000).toISOString();
  await expect(provider()).resolves.toMatchObject({ accessKeyId: 'ASIAEXAMPLE-renewed' });
});

test('without them in the environment, a container credentials endpoint is asked with its authorization token', async () => {
  const expiration = new Date(Date.now() + 3_600_000).toISOString();
  const endpoint = await server(() => ({
    status: 200,
    body: JSON.stringify({ AccessKeyId: 'ASIACONTAINER', SecretAccessKey: 'container-secret', Token: 'container-token', Expiration: expiration }),
  }));
  process.env.AWS_CONTAINER_CREDENTIALS_FULL_URI = `${endpoint.url}/v1/credentials`;
  process.env.AWS_CONTAINER_AUTHORIZATION_TOKEN = 'container-authorization';
  await expect(defaultProvider()()).resolves.toMatchObject({ accessKeyId: 'ASIACONTAINER', sessionToken: 'container-token', expiration: new Date(expiration) });
  expect(endpoint.seen.map((r) => [r.url, r.headers.authorization])).toEqual([['/v1/credentials', 'container-authorization']]);
});

test('a profile, a shared credentials file or a web identity file is never read: no credentials is a clear error', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'aws-profile-'));
  try {
    writeFileSync(join(dir, 'credentials'), '[deploy]\naws_access_key_id = AKIAFROMFILE\naws_secret_access_key = from-file\n');
    writeFileSync(join(dir, 'token'), 'web-identity-token');
    Object.assign(process.env, {
      AWS_PROFILE: 'deploy',
      AWS_SHARED_CREDENTIALS_FILE: join(dir, 'credentials'),
      AWS_CONFIG_FILE: join(dir, 'config'),
      AWS_WEB_IDENTITY_TOKEN_FILE: join(dir, 'token'),
      AWS_ROLE_ARN: 'arn:aws:iam::123456789012:role/deploy',
    });
    await expect(defaultProvider()()).rejects.toThrow(/No AWS credentials: this bundle reads them from the environment .* or a container credentials endpoint/);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('an SDK client given the chain signs its requests with the environment’s key and session token', async () => {
  lambdaEnvironment();
  const dynamo = await server(() => ({ status: 200, body: JSON.stringify({ TableNames: [] }) }));
  const client = new DynamoDBClient({ region: 'eu-west-1', endpoint: dynamo.url, credentialDefaultProvider: defaultProvider, maxAttempts: 1 });
  try {
    await client.send(new ListTablesCommand({}));
  } finally {
    client.destroy();
  }
  const [request] = dynamo.seen;
  expect(request?.headers.authorization).toMatch(/^AWS4-HMAC-SHA256 Credential=ASIAEXAMPLE\/\d{8}\/eu-west-1\/dynamodb\/aws4_request,/);
  expect(request?.headers['x-amz-security-token']).toBe('session-token');
});
