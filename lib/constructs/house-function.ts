import * as path from 'node:path';
import { Duration, aws_lambda as lambda, aws_lambda_nodejs as nodejs, aws_logs as logs } from 'aws-cdk-lib';
import type { Construct } from 'constructs';

/** The repository root: handler modules in the manifests are relative to it. */
export const PROJECT_ROOT = path.resolve(__dirname, '..', '..');

export interface HouseFunctionProps
  extends Omit<nodejs.NodejsFunctionProps, 'entry' | 'runtime' | 'architecture' | 'logGroup' | 'bundling' | 'tracing'> {
  /** Handler module relative to the project root, e.g. `functions/jobs/create.ts` (exports `handler`). */
  entry: string;
  /** Log retention of the function's own log group; one month unless told. */
  logRetention?: logs.RetentionDays;
  /**
   * Bundling overrides merged over the house defaults, e.g. `nodeModules: ['sharp']` for a handler
   * that needs a native package installed for linux-arm64 instead of bundled.
   */
  bundling?: Partial<nodejs.BundlingOptions>;
}

/**
 * The one way this project defines a Lambda function (cf. Powertools' `FunctionWithLogGroup`):
 * Node.js 22 on ARM64, an ESM bundle with the AWS SDK inside (pinned by our lock file instead of
 * whatever the runtime ships), source maps on, X-Ray tracing, and an explicit log group with
 * retention so no log-retention custom resource (an extra Lambda) is ever created.
 */
export class HouseFunction extends nodejs.NodejsFunction {
  constructor(scope: Construct, id: string, props: HouseFunctionProps) {
    const { entry, logRetention, bundling, environment, ...rest } = props;
    const logGroup = new logs.LogGroup(scope, `${id}Logs`, {
      retention: logRetention ?? logs.RetentionDays.ONE_MONTH,
    });
    super(scope, id, {
      memorySize: 1024,
      timeout: Duration.seconds(10),
      ...rest,
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
        ...environment,
      },
      bundling: {
        format: nodejs.OutputFormat.ESM,
        target: 'node22',
        platform: 'node',
        minify: true,
        sourceMap: true,
        sourcesContent: false,
        mainFields: ['module', 'main'],
        // Bundle the AWS SDK v3 too: cold starts read one file, and the version is the tested one.
        externalModules: [],
        // ESM output still meets CommonJS dependencies that call `require` (e.g. for Node built-ins).
        banner: "import { createRequire } from 'module'; const require = createRequire(import.meta.url);",
        ...bundling,
      },
    });
  }
}
