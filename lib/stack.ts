import * as fs from 'node:fs';
import * as path from 'node:path';
import { CfnOutput, Stack, type StackProps, aws_cloudwatch_actions as cwActions } from 'aws-cdk-lib';
import type { Construct } from 'constructs';
import { TABLE_DEF } from '../shared/db/table';
import { ROUTES, routeLogicalName } from '../shared/manifest/routes';
import { QUEUES, SCHEDULES, queueByName } from '../shared/manifest/wiring';
import { METRICS_NAMESPACE } from '../shared/observability/metrics';
import { ApiGateway, STAGE_NAME } from './api';
import { PROJECT_ROOT } from './constructs/house-function';
import { booleanContext, ffmpegLayer } from './constructs/native';
import { Data } from './data';
import { DOMAINS, type Domain } from './domains';
import { DomainStack } from './domain-stack';
import { Cdn, Keys, cdnPublicKeyFromContext } from './keys';
import { api5xxAlarm, tableThrottleAlarm } from './monitoring/alarms';
import { pipelineDashboard } from './monitoring/dashboard';
import { alarmTopic as createAlarmTopic } from './monitoring/topic';
import { Plumbing } from './plumbing';
import { limitsFromContext, modelsFromContext } from './settings';

export interface MarketplaceStackProps extends StackProps {
  /** D20 long-poll budget in seconds, 1..60 (context `longPollSeconds`, default 25). */
  longPollSeconds?: number;
  /**
   * D45 priority window (context `workerPriorityWindowSeconds`): 0, every worker sees every job at
   * once. The service keeps no ranking of workers that a window could favour, so another value is
   * refused rather than accepted and ignored.
   */
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
  /** KeysProps.legacySealedValues (context `legacySealedValues`, default true). */
  legacySealedValues?: boolean;
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
 * The whole service. The root stack holds what is shared and stateful: the table and bucket, the
 * keys, CloudFront, the REST API with its stage and WAF, the queues, rules, the table stream's pipe
 * and bus, the alarm topic and the dashboard. The functions are in one nested stack per domain (lib/domains.ts), so no
 * template comes near CloudFormation's 500 resources. Everything is driven by `shared/manifest`.
 * RUNTIME is never set here, so every function runs with the AWS configuration (D44).
 */
export class MarketplaceStack extends Stack {
  readonly data: Data;
  readonly keys: Keys;
  readonly cdn: Cdn;
  readonly api: ApiGateway;
  readonly plumbing: Plumbing;
  readonly domains = new Map<Domain, DomainStack>();

  constructor(scope: Construct, id: string, props: MarketplaceStackProps = {}) {
    super(scope, id, props);
    assertHandlerModulesExist();
    const ctx = (key: string): string | undefined => (this.node.tryGetContext(key) as string | undefined) || undefined;
    if ((props.workerPriorityWindowSeconds ?? 0) !== 0) {
      throw new Error(
        `context workerPriorityWindowSeconds must be 0 (got ${props.workerPriorityWindowSeconds}): every worker sees every job at once; the service keeps no ranking of workers a window could favour (docs/deploying.md)`,
      );
    }

    // Before anything else: a stack that cannot probe videos must not half-synthesize.
    const ffmpeg = ffmpegLayer(this, 'FfmpegLayer', {
      arn: props.ffmpegLayerArn ?? ctx('ffmpegLayerArn'),
      allowMissing: props.allowMissingFfmpeg ?? booleanContext(this, 'allowMissingFfmpeg'),
      neededBy: QUEUES.filter((q) => q.native?.ffmpeg).map((q) => `the ${q.name} consumer`),
    });
    // D63: secrets and keys; functions get grants and ARNs, never values.
    const cdnPublicKeyPem = props.cdnPublicKeyPem ?? cdnPublicKeyFromContext(this);
    const cdnPrivateKeySecretArn = props.cdnPrivateKeySecretArn ?? ctx('cdnPrivateKeySecretArn');
    if (!cdnPublicKeyPem || !cdnPrivateKeySecretArn) {
      throw new Error(
        'Download URLs are CloudFront signed URLs: deploy with -c cdnPublicKeyFile=<public key PEM file> (or -c cdnPublicKeyPem=...) ' +
          'and -c cdnPrivateKeySecretArn=<ARN of the secret holding the private key>. See docs/deploying.md.',
      );
    }
    const limits = limitsFromContext(this);
    const longPollSeconds = props.longPollSeconds ?? Number(ctx('longPollSeconds') ?? 25);

    this.data = new Data(this, 'Data');
    this.keys = new Keys(this, 'Keys', {
      cdnPublicKeyPem,
      cdnPrivateKeySecretArn,
      stripeSecretArn: props.stripeSecretArn ?? ctx('stripeSecretArn'),
      legacySealedValues: props.legacySealedValues ?? booleanContext(this, 'legacySealedValues', true),
    });
    this.cdn = new Cdn(this, 'Cdn', {
      bucket: this.data.bucket,
      publicKeyPem: cdnPublicKeyPem,
      overlapPublicKeyPem: cdnPublicKeyFromContext(this, 'cdnOverlapPublicKey'),
    });
    const alarmTopic = createAlarmTopic(this, 'AlarmTopic', props.alarmEmail ?? ctx('alarmEmail'));
    const alarmAction = new cwActions.SnsAction(alarmTopic);

    this.api = new ApiGateway(this, 'Api', { longPollSeconds, publicBaseUrl: props.publicBaseUrl, limits, alarmAction });
    this.plumbing = new Plumbing(this, 'Pipeline', { table: this.data.table, bucket: this.data.bucket, alarmAction });

    const environment: Record<string, string> = {
      LOG_LEVEL: 'INFO',
      POWERTOOLS_METRICS_NAMESPACE: METRICS_NAMESPACE,
      // D40: the simulated worker's delay is the sandbox queue's delivery delay.
      SANDBOX_DELAY_SECONDS: String(queueByName('sandbox').deliveryDelaySeconds ?? 15),
    };
    for (const domain of DOMAINS) {
      const nested = new DomainStack(this, `${routeLogicalName({ id: domain })}Functions`, {
        domain,
        shared: {
          table: this.data.table,
          bucket: this.data.bucket,
          keys: this.keys,
          cdn: this.cdn,
          api: this.api,
          plumbing: this.plumbing,
          alarmAction,
          environment,
          limits,
          models: modelsFromContext(this),
          ffmpegLayer: ffmpeg,
        },
      });
      this.domains.set(domain, nested);
      // A deployment must publish every method, wherever it is defined.
      this.api.restApi.latestDeployment?.node.addDependency(nested);
    }

    // Alarms of what the root owns (queue alarms are in Plumbing, function alarms in the domains).
    api5xxAlarm(this, 'Api5xxAlarm', alarmAction, { apiName: this.api.apiName, stage: STAGE_NAME, threshold: 10 });
    tableThrottleAlarm(this, 'TableThrottleAlarm', alarmAction, this.data.table, TABLE_DEF.gsis.map((g) => g.name));
    // Every dead-letter queue: the queues', the rules', the pipe's (Plumbing) and the schedules' (the domains).
    const scheduleDlqs = new Map([...this.domains.values()].flatMap((d) => [...d.scheduleDeadLetterQueues].map(([name, q]) => [name, q] as const)));
    pipelineDashboard(this, 'Dashboard', {
      plumbing: this.plumbing,
      apiName: this.api.apiName,
      stage: STAGE_NAME,
      moreDeadLetterQueues: new Map([...scheduleDlqs].map(([name, q]) => [`${name} schedule`, q] as const)),
    });

    // Everything operators and the deployed-stack tests need, by a stable name.
    new CfnOutput(this, 'ApiUrl', { value: this.api.restApi.url, description: 'Base URL; append /v1/...' });
    new CfnOutput(this, 'PublicBaseUrl', { value: this.api.baseUrl });
    new CfnOutput(this, 'TableName', { value: this.data.table.tableName });
    new CfnOutput(this, 'BucketName', { value: this.data.bucket.bucketName });
    new CfnOutput(this, 'AlarmTopicArn', { value: alarmTopic.topicArn, description: 'Alarms are published here' });
    new CfnOutput(this, 'CursorSecretArn', { value: this.keys.cursorSecret.secretArn });
    new CfnOutput(this, 'SealingKeyArn', { value: this.keys.sealingKey.keyArn });
    new CfnOutput(this, 'CdnBaseUrl', { value: this.cdn.baseUrl });
    new CfnOutput(this, 'CdnKeyPairId', { value: this.cdn.publicKey.publicKeyId });
    for (const q of QUEUES) {
      const name = routeLogicalName({ id: q.name });
      new CfnOutput(this, `${name}QueueUrl`, { value: this.plumbing.queue(q.name).queueUrl });
      new CfnOutput(this, `${name}DlqUrl`, { value: this.plumbing.deadLetterQueues.get(q.name)!.queueUrl });
    }
    // The redrive runbook (docs/operations.md) names these: `<Rule>RuleDlqUrl`, `<Pipe>PipeDlqUrl`, `<Schedule>ScheduleDlqUrl`.
    for (const [label, q] of this.plumbing.allDeadLetterQueues) {
      const m = /^(.+) (rule|pipe)$/.exec(label);
      if (m) new CfnOutput(this, `${routeLogicalName({ id: m[1]! })}${m[2] === 'rule' ? 'Rule' : 'Pipe'}DlqUrl`, { value: q.queueUrl });
    }
    for (const [name, q] of scheduleDlqs) new CfnOutput(this, `${routeLogicalName({ id: name })}ScheduleDlqUrl`, { value: q.queueUrl });
  }

  /** The function of a route id, queue name or schedule name, in whichever domain stack holds it. */
  functionOf(name: string) {
    for (const d of this.domains.values()) {
      const fn = d.functions.get(name);
      if (fn) return fn;
    }
    throw new Error(`no function for ${name}`);
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
