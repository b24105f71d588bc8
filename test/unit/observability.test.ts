/**
 * Observability plumbing (issue 13.4): AWS SDK clients are traced (X-Ray subsegments over UDP, issue 15), business metrics are EMF lines.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { createSocket } from 'node:dgram';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { S3Client } from '@aws-sdk/client-s3';
import { DynamoDBClient, GetItemCommand } from '@aws-sdk/client-dynamodb';
import { DynamoDBDocumentClient, GetCommand } from '@aws-sdk/lib-dynamodb';
import { InvokeStore, InvokeStoreBase } from '@aws/lambda-invoke-store';

const ROOT = path.resolve(__dirname, '..', '..');

function withEnv<T>(env: Record<string, string | undefined>, fn: () => T): T {
  const saved = Object.fromEntries(Object.keys(env).map((k) => [k, process.env[k]]));
  Object.assign(process.env, env);
  for (const [k, v] of Object.entries(env)) if (v === undefined) delete process.env[k];
  try {
    return fn();
  } finally {
    for (const [k, v] of Object.entries(saved)) {
      if (v === undefined) delete process.env[k];
      else process.env[k] = v;
    }
  }
}

async function withEnvAsync(env: Record<string, string | undefined>, fn: () => Promise<void>): Promise<void> {
  const saved = Object.fromEntries(Object.keys(env).map((k) => [k, process.env[k]]));
  Object.assign(process.env, env);
  for (const [k, v] of Object.entries(env)) if (v === undefined) delete process.env[k];
  try {
    await fn();
  } finally {
    for (const [k, v] of Object.entries(saved)) {
      if (v === undefined) delete process.env[k];
      else process.env[k] = v;
    }
  }
}

/** A stand-in X-Ray daemon: a UDP socket collecting what it receives. */
async function daemon(): Promise<{ address: string; received: () => Promise<string[]>; close: () => void }> {
  const sock = createSocket('udp4');
  const got: string[] = [];
  sock.on('message', (m) => got.push(m.toString('utf8')));
  await new Promise<void>((r) => sock.bind(0, '127.0.0.1', r));
  const { port } = sock.address();
  return {
    address: `127.0.0.1:${port}`,
    // UDP gives no acknowledgement: wait until the datagrams sent so far have arrived.
    received: async () => {
      for (let i = 0; i < 50 && got.length === 0; i++) await new Promise((r) => setTimeout(r, 10));
      await new Promise((r) => setTimeout(r, 20));
      return [...got];
    },
    close: () => sock.close(),
  };
}

const TRACE_ROOT = '1-5759e988-bd862e3fe1be46a994272793';
const FUNCTION_SEGMENT = '53995c3f42cd8ad8';

function lambdaEnv(daemonAddress: string, sampled = '1') {
  return {
    AWS_LAMBDA_FUNCTION_NAME: 'fn',
    RUNTIME: undefined,
    AWS_EXECUTION_ENV: 'AWS_Lambda_nodejs22.x',
    AWS_XRAY_DAEMON_ADDRESS: daemonAddress,
    _X_AMZN_TRACE_ID: `Root=${TRACE_ROOT};Parent=${FUNCTION_SEGMENT};Sampled=${sampled};Lineage=a87bd80c:0`,
  };
}

/** Runs `fn` in a Lambda environment whose X-Ray daemon is a local UDP socket, closed afterwards. */
async function inLambda(fn: (d: Awaited<ReturnType<typeof daemon>>) => Promise<void>, sampled = '1'): Promise<void> {
  const d = await daemon();
  try {
    await withEnvAsync(lambdaEnv(d.address, sampled), () => fn(d));
  } finally {
    d.close();
  }
}

/** The network at the end of the chain: answers (or fails) like the service would, and records the request headers. */
function offline<C extends { middlewareStack: { add: (...a: never[]) => void } }>(client: C, answer: { status?: number; error?: Error }) {
  const headers: Record<string, string>[] = [];
  (client.middlewareStack as unknown as { add: (mw: unknown, o: unknown) => void }).add(
    () => async (args: { request: { headers: Record<string, string> } }) => {
      headers.push({ ...args.request.headers });
      // No status: no answer came back (a socket error), so there is no response metadata either.
      if (answer.status === undefined) throw answer.error ?? new Error('no answer');
      const $metadata = { httpStatusCode: answer.status, requestId: 'REQ1', attempts: 1 };
      if (answer.error) throw Object.assign(answer.error, { $metadata });
      return { output: { $metadata }, response: { statusCode: answer.status, headers: {} } };
    },
    { step: 'finalizeRequest', priority: 'low', name: 'offline' },
  );
  return headers;
}

function loadTracer(): typeof import('../../shared/observability/tracer') {
  let mod!: typeof import('../../shared/observability/tracer');
  jest.isolateModules(() => {
    mod = require('../../shared/observability/tracer') as typeof import('../../shared/observability/tracer');
  });
  return mod;
}

const creds = { accessKeyId: 'a', secretAccessKey: 'b' };

test('in Lambda, each AWS call is sent to the X-Ray daemon as a subsegment of the function segment, in X-Ray\'s wire format', async () => {
  const mod = loadTracer();
  await inLambda(async (d) => {
    const raw = mod.traced(new DynamoDBClient({ region: 'eu-west-1', credentials: creds }));
    const headers = offline(raw, { status: 200 });
    await raw.send(new GetItemCommand({ TableName: 'marketplace', Key: { PK: { S: 'a' }, SK: { S: 'b' } } }));
    const [datagram] = await d.received();
    const [header, body] = datagram!.split('\n');
    expect(JSON.parse(header!)).toEqual({ format: 'json', version: 1 });
    const doc = JSON.parse(body!);
    expect(doc).toMatchObject({
      type: 'subsegment',
      trace_id: TRACE_ROOT,
      parent_id: FUNCTION_SEGMENT,
      name: 'DynamoDB',
      namespace: 'aws',
      aws: { operation: 'GetItem', region: 'eu-west-1', request_id: 'REQ1', retries: 0, table_name: 'marketplace' },
      http: { response: { status: 200 } },
    });
    expect(doc.id).toMatch(/^[0-9a-f]{16}$/);
    expect(doc.end_time).toBeGreaterThanOrEqual(doc.start_time);
    expect(doc.error ?? doc.fault ?? doc.throttle).toBeUndefined();
    // The call carries the trace, with its own subsegment as the parent of what the service records.
    expect(headers[0]!['X-Amzn-Trace-Id']).toBe(`Root=${TRACE_ROOT};Parent=${doc.id};Sampled=1;Lineage=a87bd80c:0`);
  });
});

test.each([
  ['a client error is marked error', 400, 'ConditionalCheckFailedException', { error: true }],
  ['a throttled call is marked throttle and error', 400, 'ProvisionedThroughputExceededException', { throttle: true, error: true }],
  ['a server error is marked fault', 500, 'InternalServerError', { fault: true }],
  ['a call that got no answer is marked fault', undefined, 'ECONNRESET', { fault: true }],
])('in Lambda, %s, with the exception as its cause, and the error still reaches the caller', async (_rule, status, name, flags) => {
  const mod = loadTracer();
  await inLambda(async (d) => {
    const raw = mod.traced(new DynamoDBClient({ region: 'eu-west-1', credentials: creds, maxAttempts: 1 }));
    const error = Object.assign(new Error('the service said no'), { name });
    offline(raw, { status, error });
    await expect(raw.send(new GetItemCommand({ TableName: 't', Key: { PK: { S: 'a' } } }))).rejects.toThrow('the service said no');
    const [datagram] = await d.received();
    const doc = JSON.parse(datagram!.split('\n')[1]!);
    expect(doc).toMatchObject({ ...flags, cause: { exceptions: [{ type: name, message: 'the service said no', remote: status !== undefined }] } });
    expect(doc.http).toEqual(status === undefined ? undefined : { response: { status } });
    for (const flag of ['error', 'fault', 'throttle']) if (!(flag in flags)) expect(doc[flag]).toBeUndefined();
  });
});

test("with Lambda's invoke store holding the invocation's trace (several invocations in one process), the subsegment goes under that trace", async () => {
  const mod = loadTracer();
  const store = await InvokeStore.getInstanceAsync();
  const otherRoot = '1-6759e988-0123456789abcdef01234567';
  // The process-wide variable names another invocation's trace; the store's is this one's.
  await inLambda(async (d) => {
    const raw = mod.traced(new DynamoDBClient({ region: 'eu-west-1', credentials: creds }));
    offline(raw, { status: 200 });
    try {
      await store.run({ [InvokeStoreBase.PROTECTED_KEYS.X_RAY_TRACE_ID]: `Root=${otherRoot};Parent=1111222233334444;Sampled=1` }, () =>
        raw.send(new GetItemCommand({ TableName: 't', Key: { PK: { S: 'a' } } })),
      );
    } finally {
      await store.run({}, async () => undefined); // no context left for the tests after this one
    }
    const doc = JSON.parse((await d.received())[0]!.split('\n')[1]!);
    expect([doc.trace_id, doc.parent_id]).toEqual([otherRoot, '1111222233334444']);
  });
});

test('an invocation that is not sampled sends nothing and leaves the trace header to the SDK', async () => {
  const mod = loadTracer();
  await inLambda(async (d) => {
    const raw = mod.traced(new DynamoDBClient({ region: 'eu-west-1', credentials: creds }));
    const headers = offline(raw, { status: 200 });
    await raw.send(new GetItemCommand({ TableName: 't', Key: { PK: { S: 'a' } } }));
    await new Promise((r) => setTimeout(r, 100));
    expect(await Promise.race([d.received(), new Promise<string[]>((r) => setTimeout(() => r([]), 200))])).toEqual([]);
    // The SDK's own recursion-detection middleware forwards the invocation's header as it is.
    expect(headers[0]!['X-Amzn-Trace-Id']).toContain('Sampled=0');
  }, '0');
});

test('in Lambda, a DynamoDB document client over a traced client sends through the same X-Ray instrumentation, added once', async () => {
  const mod = loadTracer();
  await inLambda(async (d) => {
    const raw = mod.traced(new DynamoDBClient({ region: 'eu-west-1', credentials: creds }));
    const doc = mod.traced(DynamoDBDocumentClient.from(raw));
    offline(raw, { status: 200 });
    await doc.send(new GetCommand({ TableName: 't', Key: { PK: 'a', SK: 'b' } }));
    await raw.send(new GetItemCommand({ TableName: 't', Key: { PK: { S: 'a' }, SK: { S: 'b' } } }));
    await new Promise((r) => setTimeout(r, 50));
    const docs = (await d.received()).map((g) => JSON.parse(g.split('\n')[1]!));
    expect(docs.map((x) => x.aws.operation)).toEqual(['GetItem', 'GetItem']);
    // One instrumentation on the shared stack, not one per client.
    expect(raw.middlewareStack.identify().filter((m) => m.startsWith(mod.XRAY_MIDDLEWARE))).toHaveLength(1);
  });
});

test('in Lambda, a call of the bucket\'s object client (no SDK client) is traced as the SDK\'s S3 calls are: one subsegment, the trace on the request', async () => {
  let mod!: typeof import('../../shared/storage/object-client');
  jest.isolateModules(() => {
    mod = require('../../shared/storage/object-client') as typeof import('../../shared/storage/object-client');
  });
  const traceHeaders: (string | undefined)[] = [];
  const server = createServer((req, res) => {
    traceHeaders.push(req.headers['x-amzn-trace-id'] as string | undefined);
    req.resume();
    res.writeHead(200, { 'x-amz-request-id': 'REQ7', 'x-amz-id-2': 'HOST7' }).end();
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const client = new mod.ObjectClient({ region: 'eu-west-1', bucket: 'media', endpoint: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, credentials: async () => creds });
  try {
    await inLambda(async (d) => {
      await client.putObjectTagging('uploads/a.png', { verdict: 'rejected' });
      const doc = JSON.parse((await d.received())[0]!.split('\n')[1]!);
      expect(doc).toMatchObject({
        type: 'subsegment',
        trace_id: TRACE_ROOT,
        parent_id: FUNCTION_SEGMENT,
        name: 'S3',
        namespace: 'aws',
        aws: { operation: 'PutObjectTagging', region: 'eu-west-1', request_id: 'REQ7', id_2: 'HOST7', retries: 0, bucket_name: 'media', key: 'uploads/a.png' },
        http: { response: { status: 200 } },
      });
      expect(traceHeaders).toEqual([`Root=${TRACE_ROOT};Parent=${doc.id};Sampled=1;Lineage=a87bd80c:0`]);
    });
  } finally {
    client.destroy();
    await new Promise((r) => server.close(r));
  }
});

test('outside Lambda (the local runtime, tests) traced() leaves the client alone', () => {
  const mod = loadTracer();
  const local = withEnv({ AWS_LAMBDA_FUNCTION_NAME: undefined, RUNTIME: 'local' }, () => mod.traced(new S3Client({ region: 'eu-west-1' })));
  expect(local.middlewareStack.identify().join()).not.toContain(mod.XRAY_MIDDLEWARE);
});

test('the daemon address is read in both of Lambda\'s forms', () => {
  const { daemonAddress } = loadTracer();
  expect(daemonAddress('169.254.79.129:2000')).toEqual({ host: '169.254.79.129', port: 2000 });
  expect(daemonAddress('tcp:127.0.0.1:2001 udp:127.0.0.2:2002')).toEqual({ host: '127.0.0.2', port: 2002 });
  expect(daemonAddress(undefined)).toEqual({ host: '127.0.0.1', port: 2000 });
});

test('every AWS SDK client created under shared/ goes through traced()', () => {
  const files: string[] = [];
  const walk = (dir: string) => {
    for (const e of fs.readdirSync(dir, { withFileTypes: true })) {
      const p = path.join(dir, e.name);
      if (e.isDirectory()) walk(p);
      else if (p.endsWith('.ts')) files.push(p);
    }
  };
  walk(path.join(ROOT, 'shared'));
  const untraced: string[] = [];
  for (const f of files) {
    const src = fs.readFileSync(f, 'utf8');
    for (const m of src.matchAll(/new ([A-Z][A-Za-z0-9]*Client)\(/g)) {
      if (m[1] === 'DynamoDBDocumentClient') continue;
      // Not SDK clients: every call of the small signed clients (shared/aws/signed-call.ts, under
      // the object, Converse, JSON RPC, query-protocol and STS clients) passes through tracedCall
      // (the test below).
      if (['ObjectClient', 'SignedClient', 'JsonRpcClient', 'QueryClient', 'StsClient'].includes(m[1]!)) continue;
      const before = src.slice(Math.max(0, m.index! - 40), m.index!);
      if (!/traced\(\s*$/.test(before)) untraced.push(`${path.relative(ROOT, f)}: ${m[1]}`);
    }
  }
  expect(untraced).toEqual([]);
});

test('a committed transaction writes one EMF line per event and two per ledger row, in the dashboard namespace', () => {
  const lines: string[] = [];
  const spy = jest.spyOn(process.stdout, 'write').mockImplementation(((chunk: string) => {
    lines.push(String(chunk));
    return true;
  }) as typeof process.stdout.write);
  try {
    jest.isolateModules(() => {
      const { recordCommitted, METRICS_NAMESPACE } = require('../../shared/observability/metrics') as typeof import('../../shared/observability/metrics');
      withEnv({ NODE_ENV: 'production', RUNTIME: undefined }, () =>
        recordCommitted([
          { Put: { Item: { entity: 'event', type: 'submission.approved' } } },
          { Put: { Item: { entity: 'credit_transaction', type: 'charge', amount_cents: -30 } } },
          { Put: { Item: { entity: 'job' } } },
        ]),
      );
      const emf = lines.flatMap((l) => l.split('\n')).filter(Boolean).map((l) => JSON.parse(l));
      expect(emf).toHaveLength(3);
      expect(emf.every((e) => e._aws.CloudWatchMetrics[0].Namespace === METRICS_NAMESPACE)).toBe(true);
      expect(emf.map((e) => [e.type, e.Events ?? e.LedgerMovements ?? e.LedgerCents])).toEqual([
        ['submission.approved', 1],
        ['charge', 1],
        ['charge', -30],
      ]);
    });
  } finally {
    spy.mockRestore();
  }
});
