/**
 * What deploys is what runs locally (issue 15): a route's bundle, built with the house esbuild
 * options and run with the Lambda environment (no RUNTIME=local) against DynamoDB Local, reads its
 * secret from the Parameters and Secrets extension and sends every AWS call to the X-Ray daemon.
 * The extension and the daemon are stand-ins speaking their published formats (an HTTP server
 * answering GetSecretValue's JSON, a UDP socket); the table, the keys and the data are real.
 */
import { spawn } from 'node:child_process';
import { createSocket, type Socket } from 'node:dgram';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { build } from 'esbuild';
import { houseEsbuildOptions } from '../../lib/constructs/house-function';
import { createKey, signupBuyer, type TestBuyer } from '../support/buyers';
import { startTestRuntime, type TestRuntime } from '../support/harness';

const ROOT = resolve(__dirname, '../..');
const CURSOR_ARN = 'arn:aws:secretsmanager:us-east-1:000000000000:secret:cursor-AbCdEf';
const TRACE_ROOT = '1-5759e988-bd862e3fe1be46a994272793';
const FUNCTION_SEGMENT = '53995c3f42cd8ad8';

let rt: TestRuntime;
let buyer: TestBuyer;
let dir: string;
let bundle: string;
let daemon: Socket;
const datagrams: string[] = [];
let extension: Server;
const extensionRequests: { url: string; token: string | undefined }[] = [];

beforeAll(async () => {
  rt = await startTestRuntime();
  buyer = await signupBuyer(rt);
  await createKey(rt, buyer.live, { name: 'one', scopes: ['jobs:read'] });
  dir = mkdtempSync(join(tmpdir(), 'deployed-bundle-'));
  bundle = join(dir, 'index.mjs');
  // Built as HouseFunction has NodejsFunction build it.
  await build({ ...houseEsbuildOptions(), entryPoints: [resolve(ROOT, 'functions/api-keys/list.ts')], outfile: bundle });
  daemon = createSocket('udp4');
  daemon.on('message', (m) => datagrams.push(m.toString('utf8')));
  await new Promise<void>((r) => daemon.bind(0, '127.0.0.1', r));
  extension = createServer((req, res) => {
    extensionRequests.push({ url: req.url ?? '', token: req.headers['x-aws-parameters-secrets-token'] as string | undefined });
    res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ ARN: CURSOR_ARN, Name: 'cursor', SecretString: 'cursor-key-of-the-deployed-stack' }));
  });
  await new Promise<void>((r) => extension.listen(0, 'localhost', r));
}, 120_000);

afterAll(async () => {
  daemon?.close();
  await new Promise((r) => extension?.close(r));
  if (dir) rmSync(dir, { recursive: true, force: true });
  await rt?.stop();
});

/** Two requests (`limit=1`, then the cursor the first returned) to the bundle in a process with Lambda's environment. */
function runDeployed(): Promise<{ status: number; body: { data?: { id: string }[]; has_more?: boolean; next_cursor?: string | null } }[]> {
  const script = `
    const { handler } = await import(${JSON.stringify(bundle)});
    const event = (qs) => ({ resource: '/v1/api_keys', path: '/v1/api_keys', httpMethod: 'GET', headers: { Authorization: 'Bearer ${buyer.live}' },
      multiValueHeaders: {}, queryStringParameters: qs, multiValueQueryStringParameters: null, pathParameters: null, stageVariables: null,
      requestContext: { requestId: 'r-' + Math.random(), stage: 'v1', httpMethod: 'GET', path: '/v1/api_keys', identity: { sourceIp: '203.0.113.9' }, requestTimeEpoch: Date.now() },
      body: null, isBase64Encoded: false });
    const context = { awsRequestId: 'a', functionName: 'ApiKeysList', getRemainingTimeInMillis: () => 10000 };
    const first = await handler(event({ limit: '1' }), context);
    const b1 = JSON.parse(first.body);
    const second = await handler(event({ limit: '1', cursor: b1.next_cursor }), context);
    process.stdout.write('@@' + JSON.stringify([{ status: first.statusCode, body: b1 }, { status: second.statusCode, body: JSON.parse(second.body) }]));
    setTimeout(() => process.exit(0), 100); // the datagrams are on their way; the SDK's sockets would keep the process alive
  `;
  const env = {
    PATH: process.env.PATH ?? '',
    AWS_LAMBDA_FUNCTION_NAME: 'ApiKeysList',
    AWS_EXECUTION_ENV: 'AWS_Lambda_nodejs22.x',
    AWS_REGION: 'us-east-1',
    NODE_OPTIONS: '--enable-source-maps',
    TABLE_NAME: rt.tableName,
    DYNAMODB_ENDPOINT: rt.dynamoEndpoint,
    PUBLIC_BASE_URL: 'https://api.example.com',
    LOG_LEVEL: 'ERROR',
    SECRET_ARN_CURSOR: CURSOR_ARN,
    PARAMETERS_SECRETS_EXTENSION_HTTP_PORT: String((extension.address() as AddressInfo).port),
    AWS_SESSION_TOKEN: 'session-token-of-the-function',
    AWS_XRAY_DAEMON_ADDRESS: `127.0.0.1:${daemon.address().port}`,
    _X_AMZN_TRACE_ID: `Root=${TRACE_ROOT};Parent=${FUNCTION_SEGMENT};Sampled=1`,
  };
  return new Promise((resolvePromise, reject) => {
    const child = spawn(process.execPath, ['--input-type=module', '-e', script], { env });
    let out = '';
    let err = '';
    child.stdout.on('data', (d: Buffer) => (out += d.toString()));
    child.stderr.on('data', (d: Buffer) => (err += d.toString()));
    child.on('exit', (code) => {
      const i = out.indexOf('@@');
      if (code !== 0 || i < 0) reject(new Error(`the bundle failed (${code}): ${err.slice(0, 800)}`));
      else resolvePromise(JSON.parse(out.slice(i + 2)));
    });
  });
}

let pages: Awaited<ReturnType<typeof runDeployed>>;

beforeAll(async () => {
  // The first request of a key in a minute also writes its last_used_at (and the first of an hour
  // starts the hour's count): one more UpdateItem. A request through the local stack first takes
  // that write in this minute, and a minute about to end is waited out, so the bundle's two
  // requests make exactly their own calls.
  const leftInMinute = 60_000 - (Date.now() % 60_000);
  if (leftInMinute < 20_000) await new Promise((r) => setTimeout(r, leftInMinute + 200));
  expect((await rt.request('GET', '/v1/api_keys?limit=1', { key: buyer.live })).status).toBe(200);
  pages = await runDeployed();
  // UDP gives no acknowledgement: wait for the six datagrams the two requests send.
  for (let i = 0; i < 100 && datagrams.length < 6; i++) await new Promise((r) => setTimeout(r, 20));
}, 60_000);

test('the bundle, run as deployed, lists page by page through the cursor it signed with the key from the secrets extension', () => {
  expect(pages.map((p) => p.status)).toEqual([200, 200]);
  const [first, second] = pages;
  expect(first!.body.data).toHaveLength(1);
  expect(first!.body.has_more).toBe(true);
  expect(second!.body.data).toHaveLength(1);
  expect(second!.body.data![0]!.id).not.toBe(first!.body.data![0]!.id);
});

test('the bundle carries the Lambda credential chain, not the SDK’s chain of profiles, SSO and web identity', () => {
  const code = readFileSync(bundle, 'utf8');
  expect(code).toContain('No AWS credentials: this bundle reads them from the environment');
  expect(code).not.toContain('@aws-sdk/credential-provider-node - defaultProvider');
});

test('the cursor key is read once from the extension, by its ARN, with the function’s session token', () => {
  expect(extensionRequests).toEqual([{ url: `/secretsmanager/get?secretId=${encodeURIComponent(CURSOR_ARN)}`, token: 'session-token-of-the-function' }]);
});

test('every DynamoDB call of both requests reaches the X-Ray daemon as a subsegment of the function’s segment', () => {
  const docs = datagrams.map((d) => JSON.parse(d.split('\n')[1]!));
  expect(docs.map((d) => `${d.name}.${d.aws.operation}`).sort()).toEqual(
    ['DynamoDB.BatchGetItem', 'DynamoDB.BatchGetItem', 'DynamoDB.Query', 'DynamoDB.Query', 'DynamoDB.UpdateItem', 'DynamoDB.UpdateItem'].sort(),
  );
  for (const d of docs) {
    expect(d).toMatchObject({ type: 'subsegment', trace_id: TRACE_ROOT, parent_id: FUNCTION_SEGMENT, namespace: 'aws', http: { response: { status: 200 } } });
    expect([d.aws.table_name, ...(d.aws.table_names ?? [])].filter(Boolean)[0]).toBe(rt.tableName);
  }
});
