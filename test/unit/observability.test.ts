/**
 * Observability plumbing (issue 13.4): AWS SDK clients are traced, business metrics are EMF lines.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { HeadBucketCommand, S3Client } from '@aws-sdk/client-s3';
import { DynamoDBClient, GetItemCommand } from '@aws-sdk/client-dynamodb';
import { DynamoDBDocumentClient, GetCommand } from '@aws-sdk/lib-dynamodb';

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

test('in Lambda, traced() instruments an SDK client with X-Ray by its first call, not at module load; locally it leaves the client alone', async () => {
  let mod!: typeof import('../../shared/observability/tracer');
  jest.isolateModules(() => {
    mod = require('../../shared/observability/tracer') as typeof import('../../shared/observability/tracer');
  });
  const lambdaEnv = { AWS_LAMBDA_FUNCTION_NAME: 'fn', RUNTIME: undefined, AWS_EXECUTION_ENV: 'AWS_Lambda_nodejs22.x' };
  const deployed = withEnv(lambdaEnv, () => mod.traced(new S3Client({ region: 'eu-west-1', credentials: { accessKeyId: 'a', secretAccessKey: 'b' } })));
  // Nothing of the X-Ray SDK is loaded or added before the client is used.
  expect(deployed.middlewareStack.identify().join()).not.toMatch(/XRay/i);
  // A stand-in for the network at the end of the chain: the first call goes through the whole stack.
  const seen: string[] = [];
  deployed.middlewareStack.add(
    () => async () => {
      seen.push(deployed.middlewareStack.identify().join());
      return { output: { $metadata: {} }, response: {} } as never;
    },
    { step: 'finalizeRequest', priority: 'low', name: 'offline' },
  );
  // The environment stays that of Lambda until the call is done (the Tracer reads it when loaded).
  await withEnvAsync(lambdaEnv, async () => {
    await deployed.send(new HeadBucketCommand({ Bucket: 'b' }));
  });
  expect(seen).toHaveLength(1);
  expect(seen[0]).toMatch(/XRay/i);
  const local = withEnv({ AWS_LAMBDA_FUNCTION_NAME: undefined, RUNTIME: 'local' }, () => mod.traced(new S3Client({ region: 'eu-west-1' })));
  await mod.tracingReady(local);
  expect(local.middlewareStack.identify().join()).not.toMatch(/XRay/i);
});

test('in Lambda, a DynamoDB document client over a traced client sends through the same X-Ray instrumentation, added once', async () => {
  let mod!: typeof import('../../shared/observability/tracer');
  jest.isolateModules(() => {
    mod = require('../../shared/observability/tracer') as typeof import('../../shared/observability/tracer');
  });
  const lambdaEnv = { AWS_LAMBDA_FUNCTION_NAME: 'fn', RUNTIME: undefined, AWS_EXECUTION_ENV: 'AWS_Lambda_nodejs22.x' };
  await withEnvAsync(lambdaEnv, async () => {
    const raw = mod.traced(new DynamoDBClient({ region: 'eu-west-1', credentials: { accessKeyId: 'a', secretAccessKey: 'b' } }));
    const doc = mod.traced(DynamoDBDocumentClient.from(raw));
    const seen: string[] = [];
    raw.middlewareStack.add(
      () => async () => {
        seen.push(raw.middlewareStack.identify().join());
        return { output: { $metadata: {} }, response: {} } as never;
      },
      { step: 'finalizeRequest', priority: 'low', name: 'offline' },
    );
    await doc.send(new GetCommand({ TableName: 't', Key: { PK: 'a', SK: 'b' } }));
    await raw.send(new GetItemCommand({ TableName: 't', Key: { PK: { S: 'a' }, SK: { S: 'b' } } }));
    expect(seen).toHaveLength(2);
    expect(seen[0]).toMatch(/XRay/i);
    // One instrumentation on the shared stack, not one per client.
    expect(raw.middlewareStack.identify().filter((m) => /XRay/i.test(m))).toHaveLength(1);
  });
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
