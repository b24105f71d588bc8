/**
 * What a handler's bundle carries of zod (issue 15, cold start): schemas a handler runs are written
 * with zod/mini (shared/zod.ts), so a bundle holds only the checks it uses; an API route without
 * request schemas bundles no zod at all (the error envelope recognises zod's errors by their shape).
 * zod's full, chainable API is about 95 KB minified, loaded and evaluated at every cold start; it
 * stays in the OpenAPI response schemas, which no handler loads.
 */
import { readFileSync } from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import * as esbuild from 'esbuild';
import { ROUTES, UNKNOWN_ROUTE } from '../../shared/manifest/routes';
import { QUEUES, SCHEDULES } from '../../shared/manifest/wiring';
import { loadAllHandlers } from '../../shared/openapi/build';
import { HOUSE_ALIASES } from '../../lib/constructs/house-function';
import { registeredSchemas } from '../../shared/openapi/registry';

const ROOT = path.resolve(__dirname, '../..');
const HANDLERS = [...new Set([...ROUTES.map((r) => r.handler), UNKNOWN_ROUTE.handler, ...QUEUES.map((q) => q.consumer), ...SCHEDULES.map((s) => s.handler)])];

type Reach = { zodBytes: number; fullApi: string[]; idempotencyStore: boolean; kms: boolean; s3Sdk: boolean; serviceSdks: string[]; decoders: string[]; dgram: boolean; staticExternals: string[] };

/** What a function installs beside its bundle (the manifest's `native.packages`), by handler. */
const NATIVE = new Map<string, string[]>([
  ...ROUTES.map((r) => [r.handler, r.native?.packages ?? []] as [string, string[]]),
  ...QUEUES.map((q) => [q.consumer, q.native?.packages ?? []] as [string, string[]]),
]);

/**
 * The SDK stays outside this build, but its packages declare `"sideEffects": false`, which the
 * deployed bundle honours: an import of a client that nothing uses is dropped there. The same
 * declaration, read from each package, is given to the external import here.
 */
const sdkSideEffects: esbuild.Plugin = {
  name: 'sdk-side-effects',
  setup(build) {
    build.onResolve({ filter: /^@aws-sdk\/[^/]+$/ }, (args) => {
      const pkg = JSON.parse(readFileSync(path.join(ROOT, 'node_modules', args.path, 'package.json'), 'utf8')) as { sideEffects?: unknown };
      return { path: args.path, external: true, ...(pkg.sideEffects === false ? { sideEffects: false } : {}) };
    });
  },
};

async function zodReach(): Promise<Map<string, Reach>> {
  const result = await esbuild.build({
    absWorkingDir: ROOT,
    entryPoints: HANDLERS,
    bundle: true,
    write: false,
    metafile: true,
    minify: true,
    platform: 'node',
    format: 'esm',
    target: 'node22',
    mainFields: ['module', 'main'],
    // Only zod matters here; the SDK is large and never zod.
    external: ['@aws-sdk/*', '@smithy/*', '@aws-lambda-powertools/*', ...[...NATIVE.values()].flat()],
    outdir: path.join(os.tmpdir(), 'request-bundles'),
    plugins: [sdkSideEffects],
    // The house bundling's aliases of the bare `http` import and of `node:stream/web`
    // (lib/constructs/house-function.ts).
    alias: { http: HOUSE_ALIASES.http!, 'node:stream/web': HOUSE_ALIASES['node:stream/web']! },
    logLevel: 'silent',
  });
  const reach = new Map<string, Reach>();
  for (const out of Object.values(result.metafile.outputs)) {
    if (!out.entryPoint) continue;
    const zod = Object.entries(out.inputs).filter(([p]) => p.includes('node_modules/zod/'));
    reach.set(out.entryPoint, {
      zodBytes: zod.reduce((n, [, i]) => n + i.bytesInOutput, 0),
      fullApi: zod.map(([p]) => p).filter((p) => p.includes('/v4/classic/')).slice(0, 3),
      idempotencyStore: 'shared/idempotency.ts' in out.inputs,
      // What ships: the KMS key provider's code, or an import of the KMS client (an unused module
      // that is only reached, and tree-shaken to nothing, does not count).
      kms: (out.inputs['shared/secrets/kms.ts']?.bytesInOutput ?? 0) > 0 || out.imports.some((i) => i.path === '@aws-sdk/client-kms'),
      // Statically or through import(): either way the package is in the deployed bundle.
      s3Sdk: out.imports.some((i) => i.path === '@aws-sdk/client-s3' || i.path === '@aws-sdk/lib-storage' || i.path === '@aws-sdk/s3-request-presigner'),
      serviceSdks: out.imports.map((i) => i.path).filter((p) => ['@aws-sdk/client-bedrock-runtime', '@aws-sdk/client-transcribe', '@aws-sdk/client-kms', '@aws-sdk/client-sqs', '@aws-sdk/client-sns'].includes(p)),
      dgram: out.imports.some((i) => i.path === 'node:dgram' || i.path === 'dgram'),
      decoders: [...new Set(Object.keys(out.inputs).flatMap((p) => /node_modules\/(music-metadata|exifr)\//.exec(p)?.[1] ?? []))],
      staticExternals: out.imports.filter((i) => i.external && i.kind === 'import-statement').map((i) => i.path),
    });
  }
  return reach;
}

let reach: Map<string, Reach>;

beforeAll(async () => {
  await loadAllHandlers(ROOT);
  reach = await zodReach();
}, 120_000);

test('every handler bundle was measured', () => {
  expect(reach.size).toBe(HANDLERS.length);
});

test('the not-found function (unknown routes, D4) bundles no zod, no idempotency store and no AWS service client: it reads nothing', () => {
  const r = reach.get(UNKNOWN_ROUTE.handler)!;
  expect(r).toBeDefined();
  expect({ zodBytes: r.zodBytes, idempotencyStore: r.idempotencyStore, kms: r.kms, s3Sdk: r.s3Sdk, serviceSdks: r.serviceSdks }).toEqual({
    zodBytes: 0,
    idempotencyStore: false,
    kms: false,
    s3Sdk: false,
    serviceSdks: [],
  });
});

test('no handler bundles zod’s full API: the schemas it runs use zod/mini', () => {
  const offenders = [...reach].filter(([, r]) => r.fullApi.length > 0).map(([entry, r]) => ({ entry, fullApi: r.fullApi }));
  expect(offenders).toEqual([]);
});

test('a route without request schemas bundles no zod at all', () => {
  const withSchemas = new Set(
    ROUTES.filter((r) => {
      const s = registeredSchemas(r.id);
      return s?.body !== undefined || s?.query !== undefined;
    }).map((r) => r.handler),
  );
  const routeHandlers = new Set(ROUTES.map((r) => r.handler));
  const offenders = [...reach]
    .filter(([entry, r]) => routeHandlers.has(entry) && !withSchemas.has(entry) && r.zodBytes > 0)
    .map(([entry, r]) => ({ entry, zodBytes: r.zodBytes }));
  expect(withSchemas.size).toBeGreaterThan(10);
  expect(offenders).toEqual([]);
});

test('a handler bundles at most 40 KB of zod (the checks it uses, and the English messages)', () => {
  const offenders = [...reach].filter(([, r]) => r.zodBytes > 40 * 1024).map(([entry, r]) => ({ entry, kb: Math.round(r.zodBytes / 1024) }));
  expect(offenders).toEqual([]);
});

test('a route that takes no Idempotency-Key does not bundle the idempotency store', () => {
  const unkeyed = new Set(ROUTES.filter((r) => r.idempotency === 'none').map((r) => r.handler));
  const keyed = new Set(ROUTES.filter((r) => r.idempotency !== 'none').map((r) => r.handler));
  const offenders = [...reach].filter(([entry, r]) => unkeyed.has(entry) && !keyed.has(entry) && r.idempotencyStore).map(([entry]) => entry);
  expect(unkeyed.size).toBeGreaterThan(20);
  expect(offenders).toEqual([]);
});

test('a route whose manifest grants no KMS key does not bundle the KMS client (the sealer comes only with the grant)', () => {
  const granted = new Set(ROUTES.filter((r) => r.access.kms !== undefined).map((r) => r.handler));
  const offenders = [...reach].filter(([entry, r]) => ROUTES.some((x) => x.handler === entry) && !granted.has(entry) && r.kms).map(([entry]) => entry);
  expect(granted.size).toBeGreaterThan(0);
  expect(offenders).toEqual([]);
});

test('a package a function installs beside its bundle is only imported dynamically, so it loads on first use, not at every cold start', () => {
  const offenders = [...reach].flatMap(([entry, r]) => (NATIVE.get(entry) ?? []).filter((p) => r.staticExternals.includes(p)).map((p) => `${entry}: ${p}`));
  expect(NATIVE.get('functions/pipeline/annotate.ts')).toContain('sharp');
  expect(offenders).toEqual([]);
});

test('no function imports node:http as an ES module: on Node 22 its facade loads undici (fetch, WebSocket) at every cold start', () => {
  const offenders = [...reach].filter(([, r]) => r.staticExternals.some((p) => p === 'http' || p === 'node:http')).map(([entry]) => entry);
  expect(offenders).toEqual([]);
});

test('no function imports node:stream/web at load: it builds Node\'s web streams at every cold start, for a streamed response no route sends', () => {
  const offenders = [...reach].filter(([, r]) => r.staticExternals.some((p) => p === 'stream/web' || p === 'node:stream/web')).map(([entry]) => entry);
  expect(offenders).toEqual([]);
});

test('no function bundles the S3 SDK: every bucket call, the exports’ multipart uploads included, goes through the small object client', () => {
  // shared/storage/object-client.ts (and stream-upload.ts for the exports); the S3 SDK was the
  // largest part of the upload, retry and override routes' and the pipeline consumers' cold start.
  const withSdk = [...reach].filter(([, r]) => r.s3Sdk).map(([entry]) => entry).sort();
  expect(withSdk).toEqual([]);
});

test('no function bundles the Bedrock runtime, Transcribe, KMS, SQS or SNS SDK clients: the calls they made go through the small signed clients', () => {
  // shared/aws/bedrock-converse.ts, shared/aws/transcribe-jobs.ts and shared/secrets/kms.ts; the
  // Bedrock client was the largest part of the scoring and annotation consumers' cold start after
  // the media decoders, the KMS client a sixth of the sealing routes' bundles.
  const offenders = [...reach].filter(([, r]) => r.serviceSdks.length > 0).map(([entry, r]) => `${entry}: ${r.serviceSdks.join(', ')}`);
  expect(offenders).toEqual([]);
});

test('the audio and EXIF decoders are installed beside the bundle of every function that reaches them, not bundled', () => {
  // Only the files of their kind need them; bundled, every cold start parsed them (about 300 KB).
  const offenders = [...reach].filter(([, r]) => r.decoders.length > 0).map(([entry, r]) => `${entry}: ${r.decoders.join(', ')}`);
  expect(NATIVE.get('functions/pipeline/score.ts')).toEqual(expect.arrayContaining(['music-metadata', 'exifr']));
  expect(offenders).toEqual([]);
});

test('no function loads node:dgram at its cold start: the tracer loads it with the first segment it sends', () => {
  const offenders = [...reach].filter(([, r]) => r.dgram).map(([entry]) => entry);
  expect(offenders).toEqual([]);
});
