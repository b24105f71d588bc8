import {
  Duration,
  Stack,
  aws_cloudwatch as cloudwatch,
  aws_cloudwatch_actions as cwActions,
  aws_dynamodb as dynamodb,
  aws_events as events,
  aws_events_targets as targets,
  aws_iam as iam,
  aws_lambda as lambda,
  aws_lambda_event_sources as sources,
  aws_pipes as pipes,
  aws_s3 as s3,
  aws_sns as sns,
  aws_sqs as sqs,
} from 'aws-cdk-lib';
import { Construct } from 'constructs';
import { routeLogicalName } from '../shared/manifest/routes';
import {
  BUCKET_PREFIXES,
  PIPES,
  QUEUES,
  TRANSCRIBE_JOB_PREFIX,
  RULES,
  SCHEDULES,
  type EventPattern,
  type PipeDef,
  type QueueDef,
  type RuleDef,
  type ScheduleDef,
} from '../shared/manifest/wiring';
import { bindBucket, bindQueue, bindTable, grantBedrockInvoke, grantTranscribe } from './constructs/grants';
import { HouseFunction } from './constructs/house-function';

export interface PipelineProps {
  table: dynamodb.ITable;
  bucket: s3.IBucket;
  /** Variables every pipeline function gets (CURSOR_SECRET, PUBLIC_BASE_URL, ...). */
  environment: Record<string, string>;
  /** Where every alarm of the pipeline notifies. */
  alarmTopic: sns.ITopic;
  /** The ffmpeg layer for consumers whose wiring says `native.ffmpeg` (none: they warn). */
  ffmpegLayer?: lambda.ILayerVersion;
}

/** `upload-created` → `UploadCreated` (the manifest's own naming rule). */
const pascal = (name: string): string => routeLogicalName({ id: name });

/** Messages a DLQ keeps: the SQS maximum, so nobody loses evidence over a long weekend. */
const DLQ_RETENTION = Duration.days(14);

/**
 * The asynchronous side, built from `shared/manifest/wiring.ts` (the same definitions the local
 * runtime runs): queues with dead-letter queues and alarms, their consumers, the S3 → EventBridge
 * rules, the stream pipes (outbox, sandbox) and the schedules.
 */
export class Pipeline extends Construct {
  readonly queues = new Map<string, sqs.Queue>();
  readonly deadLetterQueues = new Map<string, sqs.Queue>();
  /** Consumer and scheduled functions by queue / schedule name. */
  readonly functions = new Map<string, HouseFunction>();

  private readonly alarmAction: cloudwatch.IAlarmAction;

  constructor(scope: Construct, id: string, private readonly props: PipelineProps) {
    super(scope, id);
    this.alarmAction = new cwActions.SnsAction(props.alarmTopic);

    // Queues first: consumers and schedules may send to any of them (`access.sendTo`).
    for (const q of QUEUES) this.addQueue(q);
    for (const q of QUEUES) this.addConsumer(q);
    for (const r of RULES) this.addRule(r);
    for (const p of PIPES) this.addPipe(p);
    for (const s of SCHEDULES) this.addSchedule(s);
  }

  queue(name: string): sqs.Queue {
    const q = this.queues.get(name);
    if (!q) throw new Error(`wiring names unknown queue ${name}`);
    return q;
  }

  private addQueue(def: QueueDef): void {
    const id = pascal(def.name);
    const dlq = new sqs.Queue(this, `${id}Dlq`, {
      retentionPeriod: DLQ_RETENTION,
      encryption: sqs.QueueEncryption.SQS_MANAGED,
      enforceSSL: true,
    });
    const queue = new sqs.Queue(this, `${id}Queue`, {
      visibilityTimeout: Duration.seconds(def.visibilityTimeoutSeconds),
      deliveryDelay: def.deliveryDelaySeconds ? Duration.seconds(def.deliveryDelaySeconds) : undefined,
      deadLetterQueue: { queue: dlq, maxReceiveCount: def.maxReceiveCount },
      encryption: sqs.QueueEncryption.SQS_MANAGED,
      enforceSSL: true,
    });
    this.queues.set(def.name, queue);
    this.deadLetterQueues.set(def.name, dlq);

    this.dlqAlarm(`${id}DlqAlarm`, dlq, def.dlqAlarmThreshold, `Messages of the ${def.name} queue failed ${def.maxReceiveCount} times`);
    // A message older than a full run through its receives means the consumer is not keeping up.
    const maxAge = Math.max(15 * 60, def.visibilityTimeoutSeconds * def.maxReceiveCount + (def.deliveryDelaySeconds ?? 0));
    new cloudwatch.Alarm(this, `${id}AgeAlarm`, {
      alarmDescription: `The oldest message of the ${def.name} queue is older than ${maxAge} s`,
      metric: queue.metricApproximateAgeOfOldestMessage({ period: Duration.minutes(1), statistic: 'Maximum' }),
      threshold: maxAge,
      evaluationPeriods: 5,
      comparisonOperator: cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
      treatMissingData: cloudwatch.TreatMissingData.NOT_BREACHING,
    }).addAlarmAction(this.alarmAction);
  }

  private addConsumer(def: QueueDef): void {
    if (def.consumerTimeoutSeconds >= def.visibilityTimeoutSeconds) {
      throw new Error(`queue ${def.name}: consumer timeout must stay below the visibility timeout`);
    }
    const fn = new HouseFunction(this, `${pascal(def.name)}Consumer`, {
      entry: def.consumer,
      description: `Consumer of the ${def.name} queue`,
      timeout: Duration.seconds(def.consumerTimeoutSeconds),
      memorySize: def.consumerMemoryMb,
      environment: { ...this.props.environment },
      // Packages installed for linux-arm64 and the ffmpeg layer, as the wiring says.
      native: def.native,
      ffmpegLayer: this.props.ffmpegLayer,
    });
    this.grantAccess(fn, def.access);
    if (def.access.bucket) bindBucket(fn, this.props.bucket, def.access.bucket);
    if (def.access.bedrock) grantBedrockInvoke(fn);
    if (def.access.transcribe) {
      grantTranscribe(fn, this.props.bucket, { media: BUCKET_PREFIXES.uploads, output: BUCKET_PREFIXES.transcripts, jobName: TRANSCRIBE_JOB_PREFIX });
    }
    fn.addEventSource(
      new sources.SqsEventSource(this.queue(def.name), {
        batchSize: def.batchSize,
        // Handlers answer `batchItemFailures`: one bad message does not redeliver its batch.
        reportBatchItemFailures: true,
      }),
    );
    this.functions.set(def.name, fn);
  }

  private addRule(def: RuleDef): void {
    const id = pascal(def.name);
    // Failed deliveries from EventBridge to the queue (e.g. throttling beyond retries) land here.
    const deliveryDlq = new sqs.Queue(this, `${id}RuleDlq`, {
      retentionPeriod: DLQ_RETENTION,
      encryption: sqs.QueueEncryption.SQS_MANAGED,
      enforceSSL: true,
    });
    this.dlqAlarm(`${id}RuleDlqAlarm`, deliveryDlq, 1, `EventBridge could not deliver ${def.name} events`);

    new events.Rule(this, `${id}Rule`, {
      description: def.description,
      eventPattern: def.source === 'bucket' ? this.bucketEventPattern(def.pattern) : this.servicePattern(def.pattern),
      targets: def.targets.map(
        (name) =>
          new targets.SqsQueue(this.queue(name), {
            deadLetterQueue: deliveryDlq,
            retryAttempts: 185,
            maxEventAge: Duration.hours(24),
          }),
      ),
    });
  }

  /** The wiring's pattern, restricted to events of the media bucket (default bus, any bucket otherwise). */
  private bucketEventPattern(pattern: EventPattern): events.EventPattern {
    const { source, 'detail-type': detailType, detail, ...rest } = pattern;
    if (Object.keys(rest).length > 0) {
      throw new Error(`unsupported top-level pattern fields: ${Object.keys(rest).join(', ')}`);
    }
    if (detail !== undefined && Array.isArray(detail)) throw new Error('pattern field detail must be an object');
    return {
      source: source as string[] | undefined,
      detailType: detailType as string[] | undefined,
      detail: { ...detail, bucket: { name: [this.props.bucket.bucketName] } },
    };
  }

  /** A service's own events (e.g. Transcribe job state changes): the wiring's pattern as it is. */
  private servicePattern(pattern: EventPattern): events.EventPattern {
    const { source, 'detail-type': detailType, detail, ...rest } = pattern;
    if (Object.keys(rest).length > 0) throw new Error(`unsupported top-level pattern fields: ${Object.keys(rest).join(', ')}`);
    return { source: source as string[] | undefined, detailType: detailType as string[] | undefined, detail: detail as Record<string, unknown> | undefined };
  }

  private addPipe(def: PipeDef): void {
    const id = pascal(def.name);
    const target = this.queue(def.target);
    const dlq = new sqs.Queue(this, `${id}PipeDlq`, {
      retentionPeriod: DLQ_RETENTION,
      encryption: sqs.QueueEncryption.SQS_MANAGED,
      enforceSSL: true,
    });
    this.dlqAlarm(`${id}PipeDlqAlarm`, dlq, 1, `The ${def.name} pipe could not deliver stream records`);

    const stack = Stack.of(this);
    const role = new iam.Role(this, `${id}PipeRole`, {
      description: `EventBridge Pipe ${def.name}: read the table stream, send to ${def.target}`,
      assumedBy: new iam.ServicePrincipal('pipes.amazonaws.com', {
        conditions: { StringEquals: { 'aws:SourceAccount': stack.account } },
      }),
    });
    this.props.table.grantStreamRead(role);
    target.grantSendMessages(role);
    dlq.grantSendMessages(role);

    const pipe = new pipes.CfnPipe(this, `${id}Pipe`, {
      description: def.description,
      roleArn: role.roleArn,
      source: this.props.table.tableStreamArn!,
      sourceParameters: {
        dynamoDbStreamParameters: {
          startingPosition: 'LATEST',
          batchSize: 10,
          maximumRetryAttempts: 10,
          maximumRecordAgeInSeconds: 24 * 60 * 60,
          onPartialBatchItemFailure: 'AUTOMATIC_BISECT',
          deadLetterConfig: { arn: dlq.queueArn },
        },
        filterCriteria: { filters: [{ pattern: JSON.stringify(def.filter) }] },
      },
      // The message body is the DynamoDB stream record as JSON (eventName, dynamodb.NewImage, ...).
      target: target.queueArn,
    });
    // The pipe validates its permissions on creation: the role's policy must exist first.
    pipe.node.addDependency(role);
  }

  private addSchedule(def: ScheduleDef): void {
    const id = pascal(def.name);
    const fn = new HouseFunction(this, `${id}Schedule`, {
      entry: def.handler,
      description: def.description,
      timeout: Duration.seconds(def.timeoutSeconds),
      environment: { ...this.props.environment },
    });
    this.grantAccess(fn, def.access);
    new events.Rule(this, `${id}Rule`, {
      description: def.description,
      schedule: events.Schedule.rate(Duration.minutes(def.everyMinutes)),
      targets: [new targets.LambdaFunction(fn, { retryAttempts: 2 })],
    });
    this.functions.set(def.name, fn);
  }

  private grantAccess(fn: HouseFunction, access: { table: 'read' | 'write'; sendTo?: string[] }): void {
    bindTable(fn, this.props.table, access.table);
    for (const name of access.sendTo ?? []) bindQueue(fn, name, this.queue(name));
  }

  private dlqAlarm(id: string, dlq: sqs.IQueue, threshold: number, description: string): void {
    new cloudwatch.Alarm(this, id, {
      alarmDescription: description,
      metric: dlq.metricApproximateNumberOfMessagesVisible({ period: Duration.minutes(1), statistic: 'Maximum' }),
      threshold,
      evaluationPeriods: 1,
      comparisonOperator: cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
      treatMissingData: cloudwatch.TreatMissingData.NOT_BREACHING,
    }).addAlarmAction(this.alarmAction);
  }
}
