/**
 * How a function gets what its esbuild bundle cannot hold (the wiring's `native`, see
 * `NativeDeps` in shared/manifest/wiring.ts; docs/deploying.md):
 *
 * - npm packages: NodejsFunction `bundling.nodeModules`. CDK marks them external for esbuild (an
 *   `import('sharp')` stays an import, resolved by Node from /var/task/node_modules at run time)
 *   and, after bundling, runs `npm ci` in the asset directory with a package.json naming only
 *   those packages and our package-lock.json, so the locked versions are installed. The bundling
 *   `environment` reaches that step (aws-lambda-nodejs runs every local bundling step with
 *   `{...process.env, ...environment}`, and hands it to the container when bundling in Docker):
 *   `npm_config_os/cpu/libc` make npm pick the optional platform packages of Lambda (linux,
 *   arm64, glibc — Amazon Linux 2023), e.g. `@img/sharp-linux-arm64` and
 *   `@img/sharp-libvips-linux-arm64`, whatever machine synthesizes. Install scripts are off: they
 *   would run for the build machine, not for Lambda, and none of these packages needs one.
 * - Then an `afterBundling` hook deletes what is never loaded at run time (PRUNE_RULES: source
 *   maps, type declarations, browser builds, models and WASM variants our code does not load; an
 *   unpruned annotation install is ~470 MB, over Lambda's 250 MB) and fails the synth when the
 *   asset is still over its budget, naming the largest packages.
 * - project files read by path (region data, sandbox samples): copied into the asset by the same
 *   hook, their absolute path in Lambda (/var/task/...) given in the variable the wiring names.
 * - ffmpeg / ffprobe: a Lambda layer (context `ffmpegLayerArn`) mounted under /opt, with
 *   FFMPEG_PATH and FFPROBE_PATH pointing into it (shared/media/ffmpeg.ts reads them).
 *
 * The hooks are POSIX shell (find, rm, du): bundling works on Linux and macOS, and in CDK's
 * Docker bundling image; not on Windows outside WSL.
 */
import { Stack, Token, aws_lambda as lambda, type aws_lambda_nodejs as nodejs } from 'aws-cdk-lib';
import type { Construct } from 'constructs';
import type { NativeDeps, ShippedFile } from '../../shared/manifest/wiring';

/** npm configuration for the install into the asset: the Lambda platform, not the build machine's. */
export const LAMBDA_NPM_ENV: Readonly<Record<string, string>> = {
  npm_config_os: 'linux',
  npm_config_cpu: 'arm64',
  npm_config_libc: 'glibc',
  npm_config_ignore_scripts: 'true',
  npm_config_audit: 'false',
  npm_config_fund: 'false',
  npm_config_update_notifier: 'false',
};

/** Where Lambda unpacks a function's code (LAMBDA_TASK_ROOT); shipped files land below it. */
export const LAMBDA_TASK_ROOT = '/var/task';

/** Where the ffmpeg layer puts its executables (a layer unpacks under /opt). */
export const FFMPEG_LAYER_ENV: Readonly<Record<string, string>> = {
  FFMPEG_PATH: '/opt/bin/ffmpeg',
  FFPROBE_PATH: '/opt/bin/ffprobe',
};

/** Lambda's limit on a function's unzipped code plus all its layers (262,144,000 bytes). */
export const LAMBDA_UNZIPPED_LIMIT_MB = 250;
/**
 * Share of that limit kept for the ffmpeg layer: a function that takes the layer may bundle at most
 * 250 − 120 = 130 MB, so a layer of at most 120 MB unzipped always fits (docs/deploying.md).
 */
export const FFMPEG_LAYER_RESERVE_MB = 120;

/**
 * What is removed from the installed node_modules after the install; each rule names the code
 * that makes it true. `everywhere` and `remove` rules fail safe: after an upgrade that renames
 * things they only leave the asset larger (and the size guard says when too large). `keep` rules
 * remove what they do not name, so they are kept to conventions checked by test/cdk: every
 * @tensorflow package's `main` is `dist/*.node.js`, human's build and models are the ones
 * models.ts names, and nothing shared/ loads by path is removed.
 */
export type PruneRule =
  /** Files with these names (shell patterns), anywhere under node_modules. */
  | { why: string; everywhere: string[] }
  /** Paths under node_modules (shell patterns allowed), files or whole directories. */
  | { why: string; remove: string[] }
  /** Directories (shell patterns allowed) whose direct entries are removed unless their name matches `keep`. */
  | { why: string; dirs: string; keep: string[] };

export const PRUNE_RULES: readonly PruneRule[] = [
  {
    why: 'source maps and type declarations are never loaded (a missing map is skipped by --enable-source-maps)',
    everywhere: ['*.map', '*.d.ts', '*.d.mts', '*.d.cts'],
  },
  { why: 'type-only packages', remove: ['@types'] },
  {
    why: "Node loads each @tensorflow package's `main` (dist/*.node.js), and tfjs-backend-wasm its .wasm files; the rest of dist is browser bundles and ESM trees for bundlers",
    dirs: '@tensorflow/*/dist',
    keep: ['*.node.js', '*.wasm'],
  },
  {
    why: 'models.ts loads dist/human.node-wasm.js by path; the other builds, demo, sources and types are not loaded',
    dirs: '@vladmandic/human/dist',
    keep: ['human.node-wasm.js'],
  },
  { why: 'not loaded by human.node-wasm.js', remove: ['@vladmandic/human/demo', '@vladmandic/human/assets', '@vladmandic/human/src', '@vladmandic/human/types'] },
  {
    why: 'HUMAN_CONFIG (models.ts) enables only BlazeFace and CenterNet; the other models are never fetched',
    dirs: '@vladmandic/human/models',
    keep: ['blazeface.*', 'centernet.*'],
  },
  {
    why: 'models.ts loads the ESM core and the MobileNetV2 model only (InceptionV3 alone is 29 MB)',
    remove: [
      'nsfwjs/dist/browser',
      'nsfwjs/dist/cjs',
      'nsfwjs/dist/models/inception_v3',
      'nsfwjs/dist/models/mobilenet_v2_mid',
      'nsfwjs/dist/esm/models/inception_v3.js',
      'nsfwjs/dist/esm/models/mobilenet_v2_mid.js',
      'nsfwjs/dist/esm/model_imports/inception_v3.js',
      'nsfwjs/dist/esm/model_imports/mobilenet_v2_mid.js',
    ],
  },
  {
    // Every <core>.js + <core>.wasm pair stays: which one loads depends on the CPU's SIMD support,
    // and tesseract.js 7's Node worker passes a boolean where getCore expects the OEM, so it loads
    // the non-LSTM cores even under OEM LSTM_ONLY (seen on arm64: removing them crashes the process).
    why: 'tesseract.js in Node requires tesseract-core*.js, which reads its .wasm file; the .wasm.js builds embed the same WASM for browsers',
    remove: ['tesseract.js-core/*.wasm.js'],
  },
  { why: 'models.ts reads the 4.0.0_best_int English data, not 4.0.0', remove: ['@tesseract.js-data/eng/4.0.0'] },
];

/** Single-quote for POSIX sh. */
const sq = (s: string): string => `'${s.replace(/'/g, `'\\''`)}'`;

/** A path under node_modules with shell patterns left unquoted (so they expand) and the rest quoted. */
function shellPath(nodeModules: string, rel: string): string {
  const parts = rel.split('/').map((seg) => (/[*?[]/.test(seg) ? seg : sq(seg)));
  return `${sq(nodeModules)}/${parts.join('/')}`;
}

/** The shell commands that apply PRUNE_RULES to `<assetDir>/node_modules`. */
export function pruneCommands(assetDir: string, rules: readonly PruneRule[] = PRUNE_RULES): string[] {
  const nm = `${assetDir}/node_modules`;
  return rules.map((rule) => {
    if ('everywhere' in rule) {
      const names = rule.everywhere.map((n) => `-name ${sq(n)}`).join(' -o ');
      return `find ${sq(nm)} -type f \\( ${names} \\) -delete`;
    }
    if ('remove' in rule) return `rm -rf ${rule.remove.map((r) => shellPath(nm, r)).join(' ')}`;
    const keep = rule.keep.map((k) => `! -name ${sq(k)}`).join(' ');
    return `for d in ${shellPath(nm, rule.dirs)}; do if [ -d "$d" ]; then find "$d" -mindepth 1 -maxdepth 1 ${keep} -exec rm -rf {} +; fi; done`;
  });
}

/**
 * Fails the bundling when the asset directory is larger than `maxMb` (du, 1 MB = 1024 KiB, so it
 * errs on the large side), listing the largest packages; prints the size otherwise.
 */
export function sizeGuardCommand(assetDir: string, maxMb: number, label: string): string {
  const dir = sq(assetDir);
  const msg = sq(`${label}: the bundled function is larger than its ${maxMb} MB budget (docs/deploying.md). Largest packages:`);
  return [
    `kb=$(du -sk ${dir} | cut -f1)`,
    `echo ${sq(`${label}: bundle`)} "$((kb / 1024)) MB of ${maxMb} MB" >&2`,
    `if [ "$kb" -gt ${maxMb * 1024} ]; then echo ${msg} >&2; du -sk ${dir}/node_modules/* ${dir}/node_modules/@*/* 2>/dev/null | sort -rn | head -15 >&2; exit 1; fi`,
  ].join('; ');
}

/** The commands that copy shipped files from the project (`inputDir`) into the asset. */
export function copyCommands(inputDir: string, assetDir: string, files: readonly ShippedFile[]): string[] {
  return files.map((f) => {
    if (f.to.split('/').includes('..') || f.to.startsWith('/')) throw new Error(`shipped file target must stay inside the function: ${f.to}`);
    const target = `${assetDir}/${f.to}`;
    return `mkdir -p ${sq(target.slice(0, target.lastIndexOf('/')))} && cp -R ${sq(`${inputDir}/${f.from}`)} ${sq(target)}`;
  });
}

/** Environment variables telling the code where its shipped files are in Lambda. */
export function shippedFileEnv(native: NativeDeps | undefined): Record<string, string> {
  return Object.fromEntries((native?.files ?? []).map((f) => [f.env, `${LAMBDA_TASK_ROOT}/${f.to}`]));
}

/** The size budget of a function's own code: Lambda's limit, less the ffmpeg layer's share. */
export function bundleBudgetMb(native: NativeDeps | undefined): number {
  return LAMBDA_UNZIPPED_LIMIT_MB - (native?.ffmpeg ? FFMPEG_LAYER_RESERVE_MB : 0);
}

/**
 * NodejsFunction bundling options for a wiring definition's `native` needs (empty when it needs
 * no package and no file). Merged over the house defaults by HouseFunction. After bundling (and
 * the install): shipped files are copied, node_modules pruned, the size checked.
 */
export function bundlingFor(def: { name: string; native?: NativeDeps }): Partial<nodejs.BundlingOptions> {
  const packages = def.native?.packages ?? [];
  const files = def.native?.files ?? [];
  if (packages.length === 0 && files.length === 0) return {};
  const budget = bundleBudgetMb(def.native);
  return {
    ...(packages.length > 0 ? { nodeModules: [...packages], environment: { ...LAMBDA_NPM_ENV } } : {}),
    commandHooks: {
      beforeBundling: () => [],
      beforeInstall: () => [],
      afterBundling: (inputDir: string, outputDir: string) => [
        ...copyCommands(inputDir, outputDir, files),
        ...(packages.length > 0 ? pruneCommands(outputDir) : []),
        sizeGuardCommand(outputDir, budget, def.name),
      ],
    },
  };
}

/** `arn:aws:lambda:<region>:<account>:layer:<name>:<version>` (any partition). */
const LAYER_VERSION_ARN = /^arn:aws[a-z-]*:lambda:([a-z0-9-]+):\d{12}:layer:[A-Za-z0-9_-]+:\d+$/;

export interface FfmpegLayerOptions {
  /** The layer version ARN (context `ffmpegLayerArn`). */
  arn?: string;
  /** Deploy the functions that need ffmpeg without it, knowingly (context `allowMissingFfmpeg=true`). */
  allowMissing?: boolean;
  /** What needs ffmpeg (e.g. `the scoring consumer`), for the error message; none: no layer is needed. */
  neededBy: string[];
}

/**
 * The ffmpeg layer as an ILayerVersion, or undefined when none is needed or missing is allowed.
 * Refuses to synthesize functions that need ffmpeg without a layer unless told so: without
 * ffprobe the scoring stage refuses every video as undecodable, which is worse than no deploy.
 */
export function ffmpegLayer(scope: Construct, id: string, opts: FfmpegLayerOptions): lambda.ILayerVersion | undefined {
  const arn = opts.arn?.trim();
  if (opts.neededBy.length === 0) return undefined;
  if (!arn) {
    if (opts.allowMissing) return undefined;
    const n = opts.neededBy.length;
    const who = n > 1 ? `${opts.neededBy.slice(0, -1).join(', ')} and ${opts.neededBy[n - 1]}` : (opts.neededBy[0] ?? '');
    throw new Error(
      `${who.charAt(0).toUpperCase()}${who.slice(1)} run${opts.neededBy.length === 1 ? 's' : ''} ffprobe/ffmpeg, which Lambda does not provide. Deploy with ` +
        '-c ffmpegLayerArn=arn:aws:lambda:<region>:<account>:layer:<name>:<version> (an arm64 layer with ' +
        '/opt/bin/ffmpeg and /opt/bin/ffprobe), or knowingly without it with -c allowMissingFfmpeg=true ' +
        '(video uploads then fail their scoring step, are retried and wait in the dead-letter queues for a redrive once a stack with the layer is deployed). See docs/deploying.md.',
    );
  }
  const m = LAYER_VERSION_ARN.exec(arn);
  if (!m) throw new Error(`ffmpegLayerArn must be a layer version ARN (arn:aws:lambda:<region>:<account>:layer:<name>:<version>), got ${arn}`);
  const region = Stack.of(scope).region;
  if (!Token.isUnresolved(region) && m[1] !== region) {
    throw new Error(`ffmpegLayerArn is in ${m[1]} but the stack deploys to ${region}: a layer must be in the function's region`);
  }
  return lambda.LayerVersion.fromLayerVersionArn(scope, id, arn);
}

/** A boolean context value: true / "true", false / "false", `fallback` when absent; anything else is an error. */
export function booleanContext(scope: Construct, key: string, fallback = false): boolean {
  const v: unknown = scope.node.tryGetContext(key);
  if (v === undefined || v === null || v === '') return fallback;
  if (v === false || v === 'false') return false;
  if (v === true || v === 'true') return true;
  throw new Error(`context ${key} must be true or false, got ${String(v)}`);
}
