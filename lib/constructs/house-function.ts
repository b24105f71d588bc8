import * as path from 'node:path';
import { Annotations, Duration, aws_lambda as lambda, aws_lambda_nodejs as nodejs, aws_logs as logs } from 'aws-cdk-lib';
import type { Construct } from 'constructs';
import type { NativeDeps } from '../../shared/manifest/wiring';
import { FFMPEG_LAYER_ENV, bundlingFor, shippedFileEnv } from './native';
import { acknowledge } from './nag';

/** The repository root: handler modules in the manifests are relative to it. */
export const PROJECT_ROOT = path.resolve(__dirname, '..', '..');

export interface HouseFunctionProps
  extends Omit<nodejs.NodejsFunctionProps, 'entry' | 'runtime' | 'architecture' | 'logGroup' | 'bundling' | 'tracing'> {
  /** Handler module relative to the project root, e.g. `functions/jobs/create.ts` (exports `handler`). */
  entry: string;
  /** Log retention of the function's own log group; one month unless told. */
  logRetention?: logs.RetentionDays;
  /**
   * What the handler loads from outside its bundle (the wiring's `native`): its packages are
   * installed into the function's node_modules for linux-arm64, its files copied in (with the
   * variables naming them), and with `ffmpeg` the function gets `ffmpegLayer` and FFMPEG_PATH /
   * FFPROBE_PATH (lib/constructs/native.ts).
   */
  native?: NativeDeps;
  /**
   * The layer with /opt/bin/ffmpeg and /opt/bin/ffprobe; attached only when `native.ffmpeg` is
   * set. Without it such a function is deployed without ffmpeg, with a synth warning.
   */
  ffmpegLayer?: lambda.ILayerVersion;
  /** Bundling overrides merged over the house defaults and those `native` implies. */
  bundling?: Partial<nodejs.BundlingOptions>;
}

/**
 * What the house bundling puts in place of a package (esbuild `alias`, paths from the project
 * root): the AWS SDK's default credential chain becomes the one a Lambda function can use
 * (shared/aws/lambda-credentials.ts: the environment, then a container endpoint), without the STS,
 * SSO and Sign-in clients the SDK's chain bundles for profiles and SSO. And a bare `http` import
 * (the Stripe SDK's) takes Node's module as CommonJS (shared/aws/node-http.ts): its ES facade
 * loads undici on Node 22, 7–11 ms of the cold start. And `node:stream/web` (which @middy/core
 * imports for streamed responses) resolves Node's web streams on first use
 * (shared/aws/node-stream-web.ts): about 0.7 ms of every route's cold start on Node 22.
 */
export const HOUSE_ALIASES: Readonly<Record<string, string>> = {
  '@aws-sdk/credential-provider-node': './shared/aws/lambda-credentials.ts',
  http: './shared/aws/node-http.ts',
  'node:stream/web': './shared/aws/node-stream-web.ts',
};

/**
 * The house bundling: one minified ESM file for Node 22 with the AWS SDK inside (the version is
 * the tested one, and a cold start reads one file) and source maps.
 */
export const HOUSE_BUNDLING: nodejs.BundlingOptions = {
  format: nodejs.OutputFormat.ESM,
  target: 'node22',
  platform: 'node',
  minify: true,
  sourceMap: true,
  sourcesContent: false,
  mainFields: ['module', 'main'],
  externalModules: [],
  // NodejsFunction writes each as `--alias:<package>=<module>`.
  esbuildArgs: { '--alias': Object.entries(HOUSE_ALIASES).map(([pkg, module]) => `${pkg}=${module}`) },
  // ESM output still meets CommonJS that calls `require` (e.g. for Node built-ins) and code that
  // reads `__dirname` / `__filename` (undefined in ES modules: a module-level use would throw at
  // import). In the bundle they name the bundle itself, i.e. the function's code root.
  banner:
    "import { createRequire as __houseCreateRequire } from 'module'; import { fileURLToPath as __houseFileUrlToPath } from 'url'; " +
    "import { dirname as __houseDirname } from 'path'; const require = __houseCreateRequire(import.meta.url); " +
    'const __filename = __houseFileUrlToPath(import.meta.url); const __dirname = __houseDirname(__filename);',
};

/**
 * The esbuild options `NodejsFunction` derives from HOUSE_BUNDLING (it runs the esbuild CLI with
 * `--bundle --target --platform --format --outfile --minify --sourcemap --sources-content=false
 * --main-fields --banner:js` from the project root, with the function's `nodeModules` external),
 * for the benchmarks and tests that build a handler as it is deployed.
 */
export function houseEsbuildOptions(external: string[] = []): import('esbuild').BuildOptions {
  return {
    bundle: true,
    absWorkingDir: PROJECT_ROOT,
    format: HOUSE_BUNDLING.format === nodejs.OutputFormat.ESM ? 'esm' : 'cjs',
    target: HOUSE_BUNDLING.target,
    platform: 'node',
    minify: HOUSE_BUNDLING.minify,
    sourcemap: HOUSE_BUNDLING.sourceMap,
    sourcesContent: HOUSE_BUNDLING.sourcesContent,
    mainFields: HOUSE_BUNDLING.mainFields,
    external: [...(HOUSE_BUNDLING.externalModules ?? []), ...external],
    alias: { ...HOUSE_ALIASES },
    banner: { js: HOUSE_BUNDLING.banner! },
    logLevel: 'silent',
  };
}

/**
 * The one way this project defines a Lambda function (cf. Powertools' `FunctionWithLogGroup`):
 * Node.js 22 on ARM64, an ESM bundle with the AWS SDK inside (pinned by our lock file instead of
 * whatever the runtime ships), source maps on, X-Ray tracing, and an explicit log group with
 * retention so no log-retention custom resource (an extra Lambda) is ever created. What a handler
 * needs beyond its bundle (sharp's native binary, model files, ffmpeg) comes from `native`.
 */
export class HouseFunction extends nodejs.NodejsFunction {
  constructor(scope: Construct, id: string, props: HouseFunctionProps) {
    const { entry, logRetention, bundling, environment, native, ffmpegLayer, layers, ...rest } = props;
    const logGroup = new logs.LogGroup(scope, `${id}Logs`, {
      retention: logRetention ?? logs.RetentionDays.ONE_MONTH,
    });
    const nativeBundling = bundlingFor({ name: id, native });
    const withFfmpeg = native?.ffmpeg === true && ffmpegLayer !== undefined;
    super(scope, id, {
      memorySize: 1024,
      timeout: Duration.seconds(10),
      ...rest,
      layers: withFfmpeg ? [...(layers ?? []), ffmpegLayer] : layers,
      entry: path.join(PROJECT_ROOT, entry),
      projectRoot: PROJECT_ROOT,
      depsLockFilePath: path.join(PROJECT_ROOT, 'package-lock.json'),
      handler: 'handler',
      runtime: lambda.Runtime.NODEJS_22_X,
      architecture: lambda.Architecture.ARM_64,
      tracing: lambda.Tracing.ACTIVE,
      logGroup,
      environment: {
        NODE_OPTIONS: '--enable-source-maps',
        ...(withFfmpeg ? FFMPEG_LAYER_ENV : {}),
        ...shippedFileEnv(native),
        ...environment,
      },
      bundling: {
        ...HOUSE_BUNDLING,
        ...nativeBundling,
        ...bundling,
        environment: { ...nativeBundling.environment, ...bundling?.environment },
      },
    });
    acknowledge(this, 'AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/AWSLambdaBasicExecutionRole]', 'The standard execution role: writes to CloudWatch Logs only.');
    acknowledge(this, 'AwsSolutions-IAM5[Resource::*]', 'X-Ray PutTraceSegments/PutTelemetryRecords (active tracing) have no resource ARN.');
    acknowledge(this, 'AwsSolutions-L1', 'Pinned to Node.js 22: bundles target node22 and native packages are installed for it; upgraded deliberately.');
    if (native?.ffmpeg && !ffmpegLayer) {
      Annotations.of(this).addWarningV2(
        'media-marketplace:ffmpeg-missing',
        `${id} runs ffprobe/ffmpeg but gets no ffmpeg layer (context ffmpegLayerArn): every video and audio upload fails its ` +
          'scoring or annotation step and waits in the dead-letter queue until a stack with the layer redrives it (docs/deploying.md)',
      );
    }
  }
}
