import {
  Duration,
  Stack,
  aws_cloudwatch as cloudwatch,
  aws_dynamodb as dynamodb,
  aws_events as events,
  aws_events_targets as targets,
  aws_iam as iam,
  aws_pipes as pipes,
  aws_s3 as s3,
  aws_sqs as sqs,
} from 'aws-cdk-lib';
import { Construct } from 'constructs';
import { routeLogicalName } from '../shared/manifest/routes';
import {
  QUEUES,
  RULES,
  STREAM_RULES,
  TABLE_STREAM,
  streamRulePattern,
  type EventPattern,
  type QueueDef,
  type RuleDef,
  type StreamRuleDef,
} from '../shared/manifest/wiring';
import { dlqAlarm } from './monitoring/alarms';
import { acknowledge } from './constructs/nag';

/** `upload-created` → `UploadCreated` (the manifest's own naming rule). */
export const pascal = (name: string): string => routeLogicalName({ id: name });

/** Messages a DLQ keeps: the SQS maximum, so nobody loses evidence over a long weekend. */
export const DLQ_RETENTION = Duration.days(14);

/** An encrypted, TLS-only dead-letter queue that keeps messages 14 days. */
export function deadLetterQueue(scope: Construct, id: string): sqs.Queue {
  return new sqs.Queue(scope, id, { retentionPeriod: DLQ_RETENTION, encryption: sqs.QueueEncryption.SQS_MANAGED, enforceSSL: true });
}

export interface PlumbingProps {
  table: dynamodb.ITable;
  bucket: s3.IBucket;
  alarmAction: cloudwatch.IAlarmAction;
}

/**
 * The asynchronous plumbing from `shared/manifest/wiring.ts` (the definitions the local runtime
 * runs too): every queue with its dead-letter queue and alarms, the EventBridge rules, and the
 * table stream's one pipe with its bus and rules. It lives in the root stack, next to the table and bucket it connects; the
 * functions that consume and send are in the domain stacks.
 */
export class Plumbing extends Construct {
  readonly queues = new Map<string, sqs.Queue>();
  readonly deadLetterQueues = new Map<string, sqs.Queue>();
  /** Every DLQ of the plumbing (queues, rule deliveries, the pipe), by a readable name. */
  readonly allDeadLetterQueues = new Map<string, sqs.Queue>();
  readonly rules = new Map<string, events.Rule>();
  /** The bus the table stream's pipe puts records on (routed by the stream rules). */
  streamBus!: events.EventBus;

  constructor(scope: Construct, id: string, private readonly props: PlumbingProps) {
    super(scope, id);
    for (const q of QUEUES) this.addQueue(q);
    for (const r of RULES) this.addRule(r);
    this.addTableStream();
  }

  queue(name: string): sqs.Queue {
    const q = this.queues.get(name);
    if (!q) throw new Error(`wiring names unknown queue ${name}`);
    return q;
  }

  private addQueue(def: QueueDef): void {
    if (def.visibilityTimeoutSeconds < 6 * def.consumerTimeoutSeconds) {
      throw new Error(`queue ${def.name}: the visibility timeout must be at least 6 × the consumer timeout (AWS guidance for Lambda event sources)`);
    }
    const id = pascal(def.name);
    const dlq = deadLetterQueue(this, `${id}Dlq`);
    const queue = new sqs.Queue(this, `${id}Queue`, {
      visibilityTimeout: Duration.seconds(def.visibilityTimeoutSeconds),
      deliveryDelay: def.deliveryDelaySeconds ? Duration.seconds(def.deliveryDelaySeconds) : undefined,
      deadLetterQueue: { queue: dlq, maxReceiveCount: def.maxReceiveCount },
      encryption: sqs.QueueEncryption.SQS_MANAGED,
      enforceSSL: true,
    });
    this.queues.set(def.name, queue);
    this.deadLetterQueues.set(def.name, dlq);
    this.allDeadLetterQueues.set(`${def.name} queue`, dlq);

    dlqAlarm(this, `${id}DlqAlarm`, dlq, this.props.alarmAction, {
      threshold: def.dlqAlarmThreshold,
      description: `Messages of the ${def.name} queue failed ${def.maxReceiveCount} times and wait in its dead-letter queue (docs/operations.md: redrive)`,
    });
    // A message older than a full run through its receives means the consumer is not keeping up.
    const maxAge = Math.max(15 * 60, def.visibilityTimeoutSeconds * def.maxReceiveCount + (def.deliveryDelaySeconds ?? 0));
    new cloudwatch.Alarm(this, `${id}AgeAlarm`, {
      alarmDescription: `The oldest message of the ${def.name} queue is older than ${maxAge} s: its consumer is not keeping up (docs/operations.md)`,
      metric: queue.metricApproximateAgeOfOldestMessage({ period: Duration.minutes(1), statistic: 'Maximum' }),
      threshold: maxAge,
      evaluationPeriods: 5,
      comparisonOperator: cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
      treatMissingData: cloudwatch.TreatMissingData.NOT_BREACHING,
    }).addAlarmAction(this.props.alarmAction);
  }

  private addRule(def: RuleDef): void {
    this.rules.set(def.name, this.ruleToQueues(def.name, def.description, this.eventPattern(def), def.targets));
  }

  /**
   * A rule that sends its events to queues, each delivery retried for 24 h, then kept in the
   * rule's dead-letter queue. `input`: what of the event the queue gets (default: all of it).
   */
  private ruleToQueues(name: string, description: string, eventPattern: events.EventPattern, queues: string[], opts: { eventBus?: events.IEventBus; input?: events.RuleTargetInput } = {}): events.Rule {
    const id = pascal(name);
    // Failed deliveries from EventBridge to the queue (e.g. throttling beyond retries) land here.
    const deliveryDlq = deadLetterQueue(this, `${id}RuleDlq`);
    acknowledge(deliveryDlq, 'AwsSolutions-SQS3', `This is the dead-letter queue of the ${name} rule's deliveries.`);
    this.allDeadLetterQueues.set(`${name} rule`, deliveryDlq);
    dlqAlarm(this, `${id}RuleDlqAlarm`, deliveryDlq, this.props.alarmAction, {
      threshold: 1,
      description: `EventBridge could not deliver ${name} events to their queue (docs/operations.md: redrive)`,
    });
    return new events.Rule(this, `${id}Rule`, {
      description,
      eventBus: opts.eventBus,
      eventPattern,
      targets: queues.map(
        (q) => new targets.SqsQueue(this.queue(q), { deadLetterQueue: deliveryDlq, retryAttempts: 185, maxEventAge: Duration.hours(24), message: opts.input }),
      ),
    });
  }

  /** The wiring's pattern; bucket events are restricted to the media bucket (the default bus carries every bucket's). */
  private eventPattern(def: RuleDef): events.EventPattern {
    const { source, 'detail-type': detailType, detail, ...rest } = def.pattern;
    if (Object.keys(rest).length > 0) throw new Error(`unsupported top-level pattern fields: ${Object.keys(rest).join(', ')}`);
    if (detail !== undefined && Array.isArray(detail)) throw new Error('pattern field detail must be an object');
    const fromBucket = (def.source as string) === 'bucket';
    return {
      source: source as string[] | undefined,
      detailType: detailType as string[] | undefined,
      detail: fromBucket ? { ...(detail as EventPattern | undefined), bucket: { name: [this.props.bucket.bucketName] } } : detail,
    };
  }

  /**
   * The table stream's one reader (AWS advises at most two per shard): a pipe that puts the
   * inserts some stream rule takes on a bus of its own, and one rule per stream rule that sends the
   * stream record (the event's detail) to its queue.
   */
  private addTableStream(): void {
    const id = pascal(TABLE_STREAM.name);
    const bus = new events.EventBus(this, 'StreamBus', { description: `Table stream records from the ${TABLE_STREAM.name} pipe, routed by the stream rules` });
    this.streamBus = bus;
    for (const def of STREAM_RULES) this.addStreamRule(def, bus);

    const dlq = deadLetterQueue(this, `${id}PipeDlq`);
    acknowledge(dlq, 'AwsSolutions-SQS3', `This is the dead-letter queue of the ${TABLE_STREAM.name} pipe.`);
    this.allDeadLetterQueues.set(`${TABLE_STREAM.name} pipe`, dlq);
    dlqAlarm(this, `${id}PipeDlqAlarm`, dlq, this.props.alarmAction, {
      threshold: 1,
      description: `The ${TABLE_STREAM.name} pipe could not put table stream records on the stream bus (docs/operations.md: redrive)`,
    });

    const stack = Stack.of(this);
    const role = new iam.Role(this, `${id}PipeRole`, {
      description: `EventBridge Pipe ${TABLE_STREAM.name}: read the table stream, put events on the stream bus`,
      assumedBy: new iam.ServicePrincipal('pipes.amazonaws.com', { conditions: { StringEquals: { 'aws:SourceAccount': stack.account } } }),
    });
    this.props.table.grantStreamRead(role);
    acknowledge(role, 'AwsSolutions-IAM5[Resource::*]', 'dynamodb:ListStreams has no resource ARN (CDK grantStreamRead).');
    bus.grantPutEventsTo(role);
    dlq.grantSendMessages(role);

    const pipe = new pipes.CfnPipe(this, `${id}Pipe`, {
      description: TABLE_STREAM.description,
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
        filterCriteria: { filters: [{ pattern: JSON.stringify(TABLE_STREAM.filter) }] },
      },
      // Each record becomes one event, the stream record as JSON its detail (up to EVENT_MAX_BYTES).
      target: bus.eventBusArn,
      targetParameters: { eventBridgeEventBusParameters: { source: TABLE_STREAM.source, detailType: TABLE_STREAM.detailType } },
    });
    // The pipe validates its permissions on creation: the role's policy must exist first.
    pipe.node.addDependency(role);
  }

  /** A stream rule: its queue gets the stream record (the event's detail), as a pipe to SQS would send it. */
  private addStreamRule(def: StreamRuleDef, bus: events.IEventBus): void {
    const { source, 'detail-type': detailType, detail } = streamRulePattern(def);
    const pattern = { source: source as string[], detailType: detailType as string[], detail: detail as events.EventPattern['detail'] };
    const rule = this.ruleToQueues(def.name, def.description, pattern, [def.target], {
      eventBus: bus,
      input: events.RuleTargetInput.fromEventPath('$.detail'),
    });
    this.rules.set(def.name, rule);
  }
}
