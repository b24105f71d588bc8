/**
 * The native pieces of the deployed functions (lib/constructs/native.ts, docs/deploying.md):
 * the bundling options built from the wiring's `native`, the pruning of the installed packages
 * (run for real, with bash, on a copy of the installed packages' file tree with empty files), the
 * size guard, and a drift check that builds every handler with esbuild to see which of them reach
 * sharp or ffmpeg. The real install for linux-arm64 needs the registry, so it is not run here.
 */
import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import * as esbuild from 'esbuild';
import { HOUSE_BUNDLING } from '../../lib/constructs/house-function';
import {
  FFMPEG_LAYER_RESERVE_MB,
  LAMBDA_UNZIPPED_LIMIT_MB,
  bundlingFor,
  copyCommands,
  pruneCommands,
  shippedFileEnv,
  sizeGuardCommand,
} from '../../lib/constructs/native';
import { ROUTES } from '../../shared/manifest/routes';
import { QUEUES, SCHEDULES, queueByName, type NativeDeps } from '../../shared/manifest/wiring';
import { HUMAN_CONFIG } from '../../shared/media/annotation/models';

const ROOT = path.resolve(__dirname, '..', '..');
const NODE_MODULES = path.join(ROOT, 'node_modules');
const PACKAGE_JSON = JSON.parse(fs.readFileSync(path.join(ROOT, 'package.json'), 'utf8')) as { dependencies: Record<string, string> };

const withNative = QUEUES.filter((q): q is typeof q & { native: NativeDeps } => q.native !== undefined);
// Routes may declare native packages too (the API reference reads swagger-ui-dist's assets).
const ALL_PACKAGES = [...new Set([...withNative, ...ROUTES].flatMap((q) => q.native?.packages ?? []))];

function bash(cmd: string): { status: number | null; stderr: string } {
  const r = spawnSync('bash', ['-c', cmd], { encoding: 'utf8' });
  return { status: r.status, stderr: r.stderr };
}

function walk(dir: string, visit: (file: string) => void): void {
  for (const entry of fs.readdirSync(dir, { withFileTypes: true })) {
    const full = path.join(dir, entry.name);
    if (entry.isDirectory()) walk(full, visit);
    else visit(full);
  }
}

describe('bundlingFor: the wiring `native` as NodejsFunction bundling options', () => {
  test('installs exactly the wiring packages as nodeModules (which CDK also keeps out of the esbuild bundle)', () => {
    expect(withNative.map((q) => q.name).sort()).toEqual(['annotation', 'sandbox', 'scoring']);
    for (const q of withNative) expect([q.name, bundlingFor(q).nodeModules]).toEqual([q.name, q.native.packages]);
  });

  test('makes npm install the linux arm64 glibc builds, without running install scripts on the build machine', () => {
    for (const q of withNative) {
      expect(bundlingFor(q).environment).toMatchObject({
        npm_config_os: 'linux',
        npm_config_cpu: 'arm64',
        npm_config_libc: 'glibc',
        npm_config_ignore_scripts: 'true',
      });
    }
  });

  test('changes nothing for a definition without packages or files', () => {
    expect(bundlingFor(queueByName('webhooks'))).toEqual({});
    expect(bundlingFor({ name: 'probe-only', native: { packages: [], ffmpeg: true } })).toEqual({});
  });

  test('after the install: copies the shipped files, prunes node_modules, guards the size (130 MB with the ffmpeg layer, 250 MB without)', () => {
    expect(LAMBDA_UNZIPPED_LIMIT_MB - FFMPEG_LAYER_RESERVE_MB).toBe(130);
    for (const q of withNative) {
      const hooks = bundlingFor(q).commandHooks!;
      expect(hooks.beforeBundling('/in', '/out')).toEqual([]);
      expect(hooks.beforeInstall('/in', '/out')).toEqual([]);
      const budget = q.native.ffmpeg ? 130 : 250;
      expect(hooks.afterBundling('/in', '/out')).toEqual([
        ...copyCommands('/in', '/out', q.native.files ?? []),
        ...pruneCommands('/out'),
        sizeGuardCommand('/out', budget, q.name),
      ]);
    }
  });

  test('shipped files exist in the project, land where their variable points in Lambda, and copy for real', () => {
    const shipped = withNative.flatMap((q) => q.native.files ?? []);
    expect(shipped.map((f) => f.env).sort()).toEqual(['SANDBOX_SAMPLES_DIR', 'WORKER_REGION_GEOJSON']);
    const out = fs.mkdtempSync(path.join(os.tmpdir(), 'shipped-'));
    try {
      for (const q of withNative) {
        for (const f of q.native.files ?? []) {
          expect([f.from, fs.existsSync(path.join(ROOT, f.from))]).toEqual([f.from, true]);
          expect(shippedFileEnv(q.native)[f.env]).toBe(`/var/task/${f.to}`);
        }
        for (const cmd of copyCommands(ROOT, out, q.native.files ?? [])) expect(bash(cmd)).toEqual({ status: 0, stderr: '' });
      }
      expect(fs.existsSync(path.join(out, 'data/admin1.min.json.gz'))).toBe(true);
      expect(fs.existsSync(path.join(out, 'samples/manifest.json'))).toBe(true);
    } finally {
      fs.rmSync(out, { recursive: true, force: true });
    }
  });

  test('a shipped file may not land outside the function', () => {
    expect(() => copyCommands('/in', '/out', [{ from: 'samples', to: '../samples', env: 'X' }])).toThrow(/inside the function/);
  });

  test('every native package is a dependency in package.json, so CDK installs the version of package-lock.json', () => {
    for (const name of ALL_PACKAGES) expect([name, PACKAGE_JSON.dependencies[name]]).toEqual([name, expect.any(String)]);
  });
});

describe('pruning the installed packages (PRUNE_RULES)', () => {
  let tmp: string;
  let nm: string;
  const kept = (rel: string) => fs.existsSync(path.join(nm, rel));

  beforeAll(() => {
    // The installed packages' file tree with empty files: the rules act on names only.
    tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'prune-'));
    nm = path.join(tmp, 'node_modules');
    const roots = new Set([...ALL_PACKAGES, 'tesseract.js-core', '@tensorflow']);
    for (const root of roots) {
      walk(path.join(NODE_MODULES, root), (file) => {
        const copy = path.join(nm, path.relative(NODE_MODULES, file));
        fs.mkdirSync(path.dirname(copy), { recursive: true });
        if (file.endsWith('package.json')) fs.copyFileSync(file, copy);
        else fs.writeFileSync(copy, '');
      });
    }
    for (const cmd of pruneCommands(tmp)) {
      const r = bash(cmd);
      if (r.status !== 0) throw new Error(`${cmd}\n${r.stderr}`);
    }
  });

  afterAll(() => fs.rmSync(tmp, { recursive: true, force: true }));

  /** Every `nativeRequire('<pkg>', '<file>')` and `packageFile('<pkg>', '<path>')` under shared/. */
  function loadedByPath(): { pkg: string; rel: string; at: string }[] {
    const found: { pkg: string; rel: string; at: string }[] = [];
    walk(path.join(ROOT, 'shared'), (file) => {
      if (!file.endsWith('.ts')) return;
      const src = fs.readFileSync(file, 'utf8');
      const at = path.relative(ROOT, file);
      for (const m of src.matchAll(/nativeRequire(?:<[\s\S]*?>)?\(\s*'([^']+)'\s*,\s*'([^']+)'/g)) found.push({ pkg: m[1]!, rel: m[2]!, at });
      for (const m of src.matchAll(/packageFile\(\s*'([^']+)'(?:\s*,\s*'([^']*)')?\s*\)/g)) found.push({ pkg: m[1]!, rel: m[2] ?? '', at });
    });
    return found;
  }

  test('every package shared/ loads by path is installed for a consumer', () => {
    const loaded = loadedByPath();
    expect(loaded.length).toBeGreaterThan(5);
    for (const { pkg, at } of loaded) expect([at, pkg, ALL_PACKAGES.includes(pkg)]).toEqual([at, pkg, true]);
  });

  test('keeps every file and directory shared/ loads by path (nativeRequire, packageFile)', () => {
    for (const { pkg, rel, at } of loadedByPath()) expect([at, `${pkg}/${rel}`, kept(path.join(pkg, rel))]).toEqual([at, `${pkg}/${rel}`, true]);
  });

  test("keeps each @tensorflow package's Node entry (its main) and the WASM backend's binaries", () => {
    const packages = fs.readdirSync(path.join(nm, '@tensorflow'));
    expect(packages).toEqual(expect.arrayContaining(['tfjs', 'tfjs-core', 'tfjs-converter', 'tfjs-backend-wasm']));
    for (const name of packages) {
      const main = (JSON.parse(fs.readFileSync(path.join(nm, '@tensorflow', name, 'package.json'), 'utf8')) as { main: string }).main;
      expect([name, main]).toEqual([name, expect.stringMatching(/^(\.\/)?dist\/[^/]+\.node\.js$/)]);
      expect([name, kept(path.join('@tensorflow', name, main))]).toEqual([name, true]);
    }
    const wasm = fs.readdirSync(path.join(NODE_MODULES, '@tensorflow/tfjs-backend-wasm/dist')).filter((f) => f.endsWith('.wasm'));
    expect(wasm.length).toBeGreaterThan(0);
    for (const f of wasm) expect([f, kept(`@tensorflow/tfjs-backend-wasm/dist/${f}`)]).toEqual([f, true]);
  });

  test('keeps the model files of every model HUMAN_CONFIG enables', () => {
    const enabled: string[] = [];
    const visit = (node: unknown): void => {
      if (node === null || typeof node !== 'object' || (node as { enabled?: unknown }).enabled === false) return;
      const modelPath = (node as { modelPath?: unknown }).modelPath;
      if (typeof modelPath === 'string') enabled.push(modelPath);
      for (const child of Object.values(node)) visit(child);
    };
    visit(HUMAN_CONFIG);
    expect(enabled.sort()).toEqual(['blazeface.json', 'centernet.json']);
    for (const json of enabled) {
      const weights = json.replace(/\.json$/, '.bin');
      expect([json, kept(`@vladmandic/human/models/${json}`), kept(`@vladmandic/human/models/${weights}`)]).toEqual([json, true, true]);
    }
  });

  test('keeps every tesseract core tesseract.js may load in Node (with its .wasm), and the best_int English data', () => {
    const getCore = fs.readFileSync(path.join(NODE_MODULES, 'tesseract.js/src/worker-script/node/getCore.js'), 'utf8');
    const cores = [...getCore.matchAll(/require\('tesseract\.js-core\/([^']+)'\)/g)].map((m) => m[1]!);
    expect(cores.length).toBeGreaterThanOrEqual(6);
    for (const core of cores) {
      expect([core, kept(`tesseract.js-core/${core}.js`), kept(`tesseract.js-core/${core}.wasm`)]).toEqual([core, true, true]);
    }
    expect(fs.readdirSync(path.join(nm, '@tesseract.js-data/eng/4.0.0_best_int')).length).toBeGreaterThan(0);
  });

  test('removes source maps, type declarations, browser builds and the models nothing loads', () => {
    const left: string[] = [];
    walk(nm, (f) => {
      if (/\.(map|d\.ts)$/.test(f)) left.push(f);
    });
    expect(left).toEqual([]);
    for (const rel of [
      '@types',
      '@tensorflow/tfjs/dist/tf.min.js',
      '@tensorflow/tfjs-core/dist/ops',
      '@vladmandic/human/dist/human.esm.js',
      '@vladmandic/human/models/faceres.json',
      '@vladmandic/human/demo',
      'nsfwjs/dist/models/inception_v3',
      'nsfwjs/dist/browser',
      'tesseract.js-core/tesseract-core.wasm.js',
      '@tesseract.js-data/eng/4.0.0',
    ]) {
      expect([rel, kept(rel)]).toEqual([rel, false]);
    }
  });
});

describe('size guard', () => {
  test('fails the bundling when the asset is over its budget, naming the largest packages; passes under it', () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'guard-'));
    try {
      fs.mkdirSync(path.join(dir, 'node_modules', 'heavy'), { recursive: true });
      fs.writeFileSync(path.join(dir, 'node_modules', 'heavy', 'blob'), Buffer.alloc(3 * 1024 * 1024, 1));
      const over = bash(sizeGuardCommand(dir, 2, 'annotation'));
      expect(over.status).toBe(1);
      expect(over.stderr).toMatch(/annotation: the bundled function is larger than its 2 MB budget/);
      expect(over.stderr).toMatch(/node_modules\/heavy/);
      const under = bash(sizeGuardCommand(dir, 10, 'annotation'));
      expect(under).toEqual({ status: 0, stderr: 'annotation: bundle 3 MB of 10 MB\n' });
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('the house ESM bundle', () => {
  test('defines __dirname as the bundle directory, so module-level uses do not throw and shipped data is found next to it', async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'house-esm-'));
    try {
      await esbuild.build({
        stdin: { contents: "export { workerRegion } from './shared/media/region';", resolveDir: ROOT, loader: 'ts' },
        bundle: true,
        outfile: path.join(dir, 'index.mjs'),
        format: 'esm',
        platform: 'node',
        target: HOUSE_BUNDLING.target,
        mainFields: HOUSE_BUNDLING.mainFields,
        banner: { js: HOUSE_BUNDLING.banner! },
        logLevel: 'silent',
      });
      for (const cmd of copyCommands(ROOT, dir, queueByName('scoring').native!.files!)) expect(bash(cmd).status).toBe(0);
      const script = `const m = await import(${JSON.stringify(path.join(dir, 'index.mjs'))}); console.log(await m.workerRegion(48.8566, 2.3522));`;
      const env: Record<string, string | undefined> = { ...process.env, WORKER_REGION_GEOJSON: undefined };
      delete env.WORKER_REGION_GEOJSON;
      const r = spawnSync(process.execPath, ['--input-type=module', '-e', script], { encoding: 'utf8', env });
      expect({ status: r.status, out: r.stdout.trim(), err: r.stderr }).toEqual({ status: 0, out: 'FR-IDF', err: '' });
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });

  test.each([
    ['functions/jobs/get.ts', ['shared/aws/lambda-credentials.ts', 'shared/aws/node-stream-web.ts']],
    ['functions/pipeline/score.ts', ['shared/aws/lambda-credentials.ts']],
  ])('the esbuild command CDK runs applies the house aliases: the Lambda credential chain in place of the SDK’s (no profile, SSO or web identity providers, no STS or SSO clients), and for a route Node’s web streams on first use (%s)', (entry, replacements) => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'house-alias-'));
    try {
      // As NodejsFunction renders esbuildArgs: each `--alias` is written `--alias:<value>`.
      const aliases = (HOUSE_BUNDLING.esbuildArgs!['--alias'] as string[]).map((a) => `--alias:${a}`);
      const meta = path.join(dir, 'meta.json');
      const r = spawnSync(
        path.join(ROOT, 'node_modules', '.bin', 'esbuild'),
        ['--bundle', entry, '--platform=node', '--format=esm', '--target=node22', '--main-fields=module,main', ...aliases, `--metafile=${meta}`, `--outfile=${path.join(dir, 'index.mjs')}`, '--log-level=error'],
        { cwd: ROOT, encoding: 'utf8' },
      );
      expect({ status: r.status, err: r.stderr }).toEqual({ status: 0, err: '' });
      const inputs = Object.keys((JSON.parse(fs.readFileSync(meta, 'utf8')) as { inputs: Record<string, unknown> }).inputs);
      for (const m of replacements) expect(inputs).toContain(m);
      expect(inputs.filter((i) => /@aws-sdk\/(credential-provider-(node|ini|sso|process|web-identity|login)|nested-clients|token-providers)\//.test(i))).toEqual([]);
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('which handlers need native pieces (esbuild of every handler)', () => {
  test('a handler reaching sharp lists it in native.packages, one reaching ffmpeg.ts sets native.ffmpeg, one reading the samples ships them', async () => {
    const nativeOf = new Map<string, NativeDeps | undefined>();
    for (const r of ROUTES) nativeOf.set(r.handler, undefined);
    for (const s of SCHEDULES) nativeOf.set(s.handler, undefined);
    for (const q of QUEUES) nativeOf.set(q.consumer, q.native);

    const result = await esbuild.build({
      absWorkingDir: ROOT,
      entryPoints: [...nativeOf.keys()],
      bundle: true,
      write: false,
      metafile: true,
      platform: 'node',
      format: 'esm',
      target: 'node22',
      mainFields: ['module', 'main'],
      // Only the reach matters; the SDK is large and never native.
      external: ['@aws-sdk/*', '@smithy/*'],
      outdir: path.join(os.tmpdir(), 'native-reach'),
      logLevel: 'silent',
    });
    const reach = new Map<string, { sharp: boolean; ffmpeg: boolean; samples: boolean }>();
    for (const out of Object.values(result.metafile.outputs)) {
      if (!out.entryPoint) continue;
      const inputs = Object.keys(out.inputs);
      reach.set(out.entryPoint, {
        sharp: inputs.some((i) => i.includes('node_modules/sharp/')),
        ffmpeg: inputs.includes('shared/media/ffmpeg.ts'),
        samples: inputs.includes('shared/sandbox/samples.ts'),
      });
    }
    expect(reach.size).toBe(nativeOf.size);
    expect([...reach.values()].some((r) => r.sharp)).toBe(true);
    for (const [entry, r] of reach) {
      const native = nativeOf.get(entry);
      const shipsSamples = (native?.files ?? []).some((f) => f.from === 'samples' && f.env === 'SANDBOX_SAMPLES_DIR');
      expect({
        entry,
        sharp: r.sharp && !native?.packages.includes('sharp'),
        ffmpeg: r.ffmpeg && !native?.ffmpeg,
        samples: r.samples && !shipsSamples,
      }).toEqual({ entry, sharp: false, ffmpeg: false, samples: false });
    }
  });
});
