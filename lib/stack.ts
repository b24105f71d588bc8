import * as fs from 'node:fs';
import * as path from 'node:path';
import { CfnOutput, Stack, type StackProps, aws_secretsmanager as secretsmanager, aws_sns as sns } from 'aws-cdk-lib';
import type { Construct } from 'constructs';
import { ROUTES, routeLogicalName } from '../shared/manifest/routes';
import { QUEUES, SCHEDULES, queueByName } from '../shared/manifest/wiring';
import { Api } from './api';
import { bindQueue } from './constructs/grants';
import { PROJECT_ROOT } from './constructs/house-function';
import { booleanContext, ffmpegLayer } from './constructs/native';
import { Data } from './data';
import { Pipeline } from './pipeline';

export interface MarketplaceStackProps extends StackProps {
  /** D20 long-poll budget in seconds, 1..60 (context `longPollSeconds`, default 25). */
  longPollSeconds?: number;
  /** D45 priority window (context `workerPriorityWindowSeconds`, default 0). */
  workerPriorityWindowSeconds?: number;
  /** Public base URL for links, e.g. a custom domain (context `publicBaseUrl`). */
  publicBaseUrl?: string;
  /**
   * Layer version ARN of an arm64 layer with /opt/bin/ffmpeg and /opt/bin/ffprobe, for the
   * consumers whose wiring says `native.ffmpeg` (context `ffmpegLayerArn`; docs/deploying.md).
   */
  ffmpegLayerArn?: string;
  /** Synthesize those consumers without ffmpeg instead of failing (context `allowMissingFfmpeg=true`). */
  allowMissingFfmpeg?: boolean;
}

/**
 * The whole service: Data (table, bucket), Api (one Lambda per route) and Pipeline (queues,
 * consumers, rules, pipes, schedules), all driven by the manifests in `shared/manifest`.
 * RUNTIME is never set here, so every function runs with the AWS configuration (D44).
 */
export class MarketplaceStack extends Stack {
  readonly data: Data;
  readonly api: Api;
  readonly pipeline: Pipeline;

  constructor(scope: Construct, id: string, props: MarketplaceStackProps = {}) {
    super(scope, id, props);
    assertHandlerModulesExist();

    // Before anything else: a stack that cannot probe videos must not half-synthesize.
    const ffmpeg = ffmpegLayer(this, 'FfmpegLayer', {
      arn: props.ffmpegLayerArn ?? this.node.tryGetContext('ffmpegLayerArn'),
      allowMissing: props.allowMissingFfmpeg ?? booleanContext(this, 'allowMissingFfmpeg'),
      neededBy: QUEUES.filter((q) => q.native?.ffmpeg).map((q) => `the ${q.name} consumer`),
    });

    this.data = new Data(this, 'Data');

    // D12 cursor HMAC key, generated at deploy time and never written into the template.
    const cursorSecret = new secretsmanager.Secret(this, 'CursorSecret', {
      description: 'HMAC key of tamper-evident list cursors (D12)',
      generateSecretString: { passwordLength: 64, excludePunctuation: true },
    });
    // `shared/config.ts` reads CURSOR_SECRET from the environment (the local runtime does the
    // same). `unsafeUnwrap()` yields a CloudFormation dynamic reference
    // ({{resolve:secretsmanager:...}}), so the value is in neither the template nor cdk.out; it is
    // resolved at deploy time into the function configuration, readable only by principals with
    // lambda:GetFunctionConfiguration on these functions. A rotation needs a redeploy.
    // Key that encrypts webhook signing secrets at rest (they must be recoverable to sign, D37).
    const webhookSecretKey = new secretsmanager.Secret(this, 'WebhookSecretKey', {
      description: 'AES-256-GCM key for webhook endpoint signing secrets at rest (D36, D37)',
      generateSecretString: { passwordLength: 64, excludePunctuation: true },
    });
    const common: Record<string, string> = {
      CURSOR_SECRET: cursorSecret.secretValue.unsafeUnwrap(),
      WEBHOOK_SECRET_KEY: webhookSecretKey.secretValue.unsafeUnwrap(),
      LOG_LEVEL: 'INFO',
      // D40: the simulated worker's delay is the sandbox queue's delivery delay.
      SANDBOX_DELAY_SECONDS: String(queueByName('sandbox').deliveryDelaySeconds ?? 15),
      WORKER_PRIORITY_WINDOW_SECONDS: String(props.workerPriorityWindowSeconds ?? 0),
    };

    this.api = new Api(this, 'Api', {
      table: this.data.table,
      bucket: this.data.bucket,
      environment: common,
      longPollSeconds: props.longPollSeconds ?? 25,
      publicBaseUrl: props.publicBaseUrl,
    });

    const alarmTopic = new sns.Topic(this, 'AlarmTopic', { displayName: 'Media marketplace alarms' });
    this.pipeline = new Pipeline(this, 'Pipeline', {
      table: this.data.table,
      bucket: this.data.bucket,
      environment: { ...common, PUBLIC_BASE_URL: this.api.baseUrl },
      alarmTopic,
      ffmpegLayer: ffmpeg,
    });

    // Routes that enqueue work (e.g. webhook replay, D37) may send to their queues, nothing more.
    for (const route of ROUTES) {
      for (const queueName of route.access.sendTo ?? []) {
        bindQueue(this.api.functions.get(route.id)!, queueName, this.pipeline.queue(queueName));
      }
    }

    // Everything operators and the deployed-stack tests need, by a stable name.
    new CfnOutput(this, 'ApiUrl', { value: this.api.restApi.url, description: 'Base URL; append /v1/...' });
    new CfnOutput(this, 'PublicBaseUrl', { value: this.api.baseUrl });
    new CfnOutput(this, 'TableName', { value: this.data.table.tableName });
    new CfnOutput(this, 'BucketName', { value: this.data.bucket.bucketName });
    new CfnOutput(this, 'AlarmTopicArn', { value: alarmTopic.topicArn, description: 'Subscribe to get alarms' });
    new CfnOutput(this, 'CursorSecretArn', { value: cursorSecret.secretArn });
    for (const q of QUEUES) {
      const name = routeLogicalName({ id: q.name });
      new CfnOutput(this, `${name}QueueUrl`, { value: this.pipeline.queue(q.name).queueUrl });
      new CfnOutput(this, `${name}DlqUrl`, { value: this.pipeline.deadLetterQueues.get(q.name)!.queueUrl });
    }
  }
}

/** Name every missing handler module at once (NodejsFunction would stop at the first one). */
function assertHandlerModulesExist(): void {
  const modules = new Set([...ROUTES.map((r) => r.handler), ...QUEUES.map((q) => q.consumer), ...SCHEDULES.map((s) => s.handler)]);
  const missing = [...modules].filter((m) => !fs.existsSync(path.join(PROJECT_ROOT, m)));
  if (missing.length > 0) {
    throw new Error(`${missing.length} handler module(s) named in shared/manifest do not exist:\n  ${missing.join('\n  ')}`);
  }
}
