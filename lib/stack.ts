import * as fs from 'node:fs';
import * as path from 'node:path';
import { CfnOutput, Stack, type StackProps } from 'aws-cdk-lib';
import { alarmTopic as createAlarmTopic } from './monitoring/topic';
import type { Construct } from 'constructs';
import { ROUTES, routeLogicalName } from '../shared/manifest/routes';
import { QUEUES, SCHEDULES, queueByName } from '../shared/manifest/wiring';
import { Api } from './api';
import { bindQueue } from './constructs/grants';
import { PROJECT_ROOT } from './constructs/house-function';
import { booleanContext, ffmpegLayer } from './constructs/native';
import { Data } from './data';
import { Cdn, Keys, cdnPublicKeyFromContext } from './keys';
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
  /** CloudFront public key PEM (context `cdnPublicKeyPem`, or `cdnPublicKeyFile` naming a file). */
  cdnPublicKeyPem?: string;
  /** ARN of the secret holding the matching private key PEM (context `cdnPrivateKeySecretArn`). */
  cdnPrivateKeySecretArn?: string;
  /** ARN of the Stripe secret `{"secret_key","webhook_secret"}` (context `stripeSecretArn`); none: payments disabled. */
  stripeSecretArn?: string;
  /** Address subscribed to the alarm topic (context `alarmEmail`). */
  alarmEmail?: string;
}

/**
 * The whole service: Data (table, bucket), Api (one Lambda per route) and Pipeline (queues,
 * consumers, rules, pipes, schedules), all driven by the manifests in `shared/manifest`.
 * RUNTIME is never set here, so every function runs with the AWS configuration (D44).
 */
export class MarketplaceStack extends Stack {
  readonly data: Data;
  readonly keys: Keys;
  readonly cdn: Cdn;
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

    // D63: secrets and keys; functions get grants and ARNs, never values.
    const cdnPublicKeyPem = props.cdnPublicKeyPem ?? cdnPublicKeyFromContext(this);
    const cdnPrivateKeySecretArn = props.cdnPrivateKeySecretArn ?? this.node.tryGetContext('cdnPrivateKeySecretArn');
    if (!cdnPublicKeyPem || !cdnPrivateKeySecretArn) {
      throw new Error(
        'Download URLs are CloudFront signed URLs: deploy with -c cdnPublicKeyFile=<public key PEM file> (or -c cdnPublicKeyPem=...) ' +
          'and -c cdnPrivateKeySecretArn=<ARN of the secret holding the private key>. See docs/deploying.md.',
      );
    }
    this.keys = new Keys(this, 'Keys', {
      cdnPublicKeyPem,
      cdnPrivateKeySecretArn,
      stripeSecretArn: props.stripeSecretArn ?? (this.node.tryGetContext('stripeSecretArn') || undefined),
    });
    this.cdn = new Cdn(this, 'Cdn', {
      bucket: this.data.bucket,
      publicKeyPem: cdnPublicKeyPem,
      overlapPublicKeyPem: cdnPublicKeyFromContext(this, 'cdnOverlapPublicKey'),
    });

    const common: Record<string, string> = {
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
      keys: this.keys,
      cdn: this.cdn,
    });

    const alarmTopic = createAlarmTopic(this, 'AlarmTopic', props.alarmEmail ?? (this.node.tryGetContext('alarmEmail') || undefined));
    this.pipeline = new Pipeline(this, 'Pipeline', {
      table: this.data.table,
      bucket: this.data.bucket,
      environment: { ...common, PUBLIC_BASE_URL: this.api.baseUrl },
      alarmTopic,
      ffmpegLayer: ffmpeg,
      keys: this.keys,
      cdn: this.cdn,
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
    new CfnOutput(this, 'CursorSecretArn', { value: this.keys.cursorSecret.secretArn });
    new CfnOutput(this, 'SealingKeyArn', { value: this.keys.sealingKey.keyArn });
    new CfnOutput(this, 'CdnBaseUrl', { value: this.cdn.baseUrl });
    new CfnOutput(this, 'CdnKeyPairId', { value: this.cdn.publicKey.publicKeyId });
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
