import {
  Duration,
  NestedStack,
  Size,
  Stack,
  type NestedStackProps,
  aws_apigateway as apigw,
  aws_cloudwatch as cloudwatch,
  aws_dynamodb as dynamodb,
  aws_events as events,
  aws_events_targets as targets,
  aws_iam as iam,
  aws_lambda as lambda,
  aws_lambda_destinations as destinations,
  aws_lambda_event_sources as sources,
  aws_s3 as s3,
  aws_sqs as sqs,
} from 'aws-cdk-lib';
import type { Construct } from 'constructs';
import { ROUTES, routeLogicalName, type RouteDef } from '../shared/manifest/routes';
import { QUEUES, SCHEDULES, type QueueDef, type ScheduleDef } from '../shared/manifest/wiring';
import { STAGE_NAME, latencyThresholdMs, longPollTimeouts, type ApiGateway } from './api';
import { ROUTE_FUNCTION_TIMEOUT_SECONDS } from '../shared/manifest/timeouts';
import { bindBucket, bindIdempotencyRecords, bindKeyAccess, bindQueue, bindRequestCounting, bindTable, bindWaitSlots, grantBedrockInvoke, grantSms, secretsExtension, UploadSigner, type CdnResources, type KeyResources } from './constructs/grants';
import { HouseFunction } from './constructs/house-function';
import { acknowledge } from './constructs/nag';
import { queueDomain, routeDomain, scheduleDomain, type Domain } from './domains';
import { dlqAlarm, functionAlarms, methodLatencyAlarm } from './monitoring/alarms';
import { deadLetterQueue, pascal, type Plumbing } from './plumbing';
import type { Limits, ModelSettings } from './settings';

/** What every domain stack is given by the root stack (all of it lives there). */
export interface SharedResources {
  table: dynamodb.ITable;
  bucket: s3.IBucket;
  keys: KeyResources;
  cdn: CdnResources;
  api: ApiGateway;
  plumbing: Plumbing;
  alarmAction: cloudwatch.IAlarmAction;
  /** Plain settings every function gets (never a secret). */
  environment: Record<string, string>;
  limits: Limits;
  models: ModelSettings;
  ffmpegLayer?: lambda.ILayerVersion;
}

export interface DomainStackProps extends NestedStackProps {
  domain: Domain;
  shared: SharedResources;
}

/**
 * The functions of one domain (lib/domains.ts): its routes (Lambda + API method), queue consumers
 * and schedules, each with its grants and alarms, all read from the manifest.
 */
export class DomainStack extends NestedStack {
  readonly functions = new Map<string, HouseFunction>();
  /** API methods of this stack; the root's deployment depends on them. */
  readonly methods: apigw.Method[] = [];
  /**
   * The upload-signing role of this stack's functions whose access says `uploadSigner` (created
   * with the first of them; none in a stack without one). Here rather than in the root stack: its
   * trust policy names their roles, and they hold its ARN.
   */
  readonly uploadSigner: UploadSigner;
  /** The dead-letter queue of each schedule of this stack (a run EventBridge could not start), by schedule name. */
  readonly scheduleDeadLetterQueues = new Map<string, sqs.IQueue>();

  constructor(scope: Construct, id: string, private readonly props: DomainStackProps) {
    super(scope, id, { description: `Media marketplace: ${props.domain} functions`, ...props });
    const { domain } = props;
    this.uploadSigner = new UploadSigner(this, 'UploadSigner', props.shared.bucket);
    for (const r of ROUTES.filter((x) => routeDomain(x) === domain)) this.addRoute(r);
    for (const q of QUEUES.filter((x) => queueDomain(x) === domain)) this.addConsumer(q);
    for (const s of SCHEDULES.filter((x) => scheduleDomain(x) === domain)) this.addSchedule(s);
  }

  private addRoute(route: RouteDef): void {
    const { shared } = this.props;
    const longPoll = longPollTimeouts(shared.api.longPollSeconds);
    const name = routeLogicalName(route);
    const fn = new HouseFunction(this, name, {
      entry: route.handler,
      ...(route.native ? { native: route.native } : {}),
      description: `${route.method} ${route.path} (${route.id})`,
      // Below the integration timeout (29 s; a long poll's, one second above its function's), so a
      // stuck handler ends in its own log with a 502, not a 504 while it runs on.
      timeout: route.longPoll ? longPoll.lambda : Duration.seconds(ROUTE_FUNCTION_TIMEOUT_SECONDS),
      // No reserved concurrency on a long-poll route: it would cap the route's plain GETs too, and
      // held waits could fill it. Held waits are counted in the table instead (long-poll-slots.ts).
      paramsAndSecrets: secretsExtension(route.access, shared.keys),
      environment: {
        ...shared.environment,
        PUBLIC_BASE_URL: shared.api.baseUrl,
        ...(route.longPoll
          ? {
              LONG_POLL_MAX_SECONDS: String(shared.api.longPollSeconds),
              LONG_POLL_MAX_WAITS: String(shared.limits.longPollMaxWaits),
              LONG_POLL_MAX_WAITS_PER_ORG: String(shared.limits.longPollMaxWaitsPerOrg),
            }
          : {}),
      },
    });
    bindTable(fn, shared.table, route.access.table);
    if (route.access.table === 'read' && route.rateLimit !== 'none') bindRequestCounting(fn, shared.table);
    if (route.longPoll && route.access.table === 'read') bindWaitSlots(fn, shared.table);
    if (route.access.table === 'read' && route.idempotency !== 'none') bindIdempotencyRecords(fn, shared.table);
    if (route.access.bucket) bindBucket(fn, shared.bucket, route.access.bucket);
    if (route.access.sms) grantSms(fn);
    for (const q of route.access.sendTo ?? []) bindQueue(fn, q, shared.plumbing.queue(q));
    bindKeyAccess(fn, route.access, shared.keys, shared.cdn, undefined, this.uploadSigner);
    functionAlarms(fn, shared.alarmAction, `${route.method} ${route.path}`);

    // The method is created here, on the resource the root stack made for the path. Lambda proxy
    // integration: the body reaches the handler as sent (text, or base64 for binary media types).
    // Written out rather than LambdaIntegration, whose permission names the stage and so would
    // make this stack depend on the root's deployment, which depends on this stack's methods.
    const stack = Stack.of(this);
    const method = new apigw.Method(this, `${name}Method`, {
      resource: shared.api.resource(route.path),
      httpMethod: route.method,
      integration: new apigw.Integration({
        type: apigw.IntegrationType.AWS_PROXY,
        integrationHttpMethod: 'POST',
        uri: `arn:${stack.partition}:apigateway:${stack.region}:lambda:path/2015-03-31/functions/${fn.functionArn}/invocations`,
        options: { timeout: route.longPoll ? longPoll.integration : undefined },
      }),
      options: { operationName: route.id, authorizationType: apigw.AuthorizationType.NONE },
    });
    fn.addPermission('ApiInvoke', {
      principal: new iam.ServicePrincipal('apigateway.amazonaws.com'),
      sourceArn: shared.api.restApi.arnForExecuteApi(route.method, route.path.replace(/\{[^}]+\}/g, '*'), STAGE_NAME),
    });
    this.methods.push(method);
    const who = route.principal === 'none' ? 'open signup route, limited per IP by the WAF and the handler' : 'hashed API keys / worker tokens are checked by the handler middleware, so a revoke takes effect at once';
    acknowledge(method, 'AwsSolutions-APIG4', `No API Gateway authorizer by design: ${who}.`);
    acknowledge(method, 'AwsSolutions-COG4', 'No Cognito: callers are servers with API keys and workers with tokens, checked in the handler.');
    methodLatencyAlarm(method, shared.alarmAction, {
      apiName: shared.api.apiName,
      stage: STAGE_NAME,
      method: route.method,
      resourcePath: route.path,
      thresholdMs: latencyThresholdMs(route, shared.api.longPollSeconds),
      what: `${route.method} ${route.path}`,
    });
    this.functions.set(route.id, fn);
  }

  private addConsumer(def: QueueDef): void {
    const { shared } = this.props;
    if (def.consumerTimeoutSeconds >= def.visibilityTimeoutSeconds) {
      throw new Error(`queue ${def.name}: consumer timeout must stay below the visibility timeout`);
    }
    const fn = new HouseFunction(this, `${pascal(def.name)}Consumer`, {
      entry: def.consumer,
      description: `Consumer of the ${def.name} queue`,
      timeout: Duration.seconds(def.consumerTimeoutSeconds),
      memorySize: def.consumerMemoryMb,
      ...(def.ephemeralStorageMb ? { ephemeralStorageSize: Size.mebibytes(def.ephemeralStorageMb) } : {}),
      // A designed loop through the consumer's own queue (the wiring says why): Lambda would stop it
      // after 16 invocations of one chain.
      ...(def.recursiveLoop === 'allow' ? { recursiveLoop: lambda.RecursiveLoop.ALLOW } : {}),
      paramsAndSecrets: secretsExtension(def.access, shared.keys),
      environment: {
        ...shared.environment,
        PUBLIC_BASE_URL: shared.api.baseUrl,
        ...(def.access.bedrock ? { BEDROCK_MODEL_ID: shared.models.bedrockModelId, ANNOTATION_MODEL_ID: shared.models.annotationModelId } : {}),
      },
      // Packages installed for linux-arm64 and the ffmpeg layer, as the wiring says.
      native: def.native,
      ffmpegLayer: shared.ffmpegLayer,
    });
    bindTable(fn, shared.table, def.access.table);
    for (const q of def.access.sendTo ?? []) bindQueue(fn, q, shared.plumbing.queue(q));
    if (def.access.bucket) bindBucket(fn, shared.bucket, def.access.bucket);
    if (def.access.bedrock) grantBedrockInvoke(fn, [...new Set([shared.models.bedrockModelId, shared.models.annotationModelId])]);
    bindKeyAccess(fn, def.access, shared.keys, shared.cdn, shared.bucket, this.uploadSigner);
    functionAlarms(fn, shared.alarmAction, `The ${def.name} consumer`);
    const maxConcurrency = shared.limits.consumerMaxConcurrency(def);
    fn.addEventSource(
      new sources.SqsEventSource(shared.plumbing.queue(def.name), {
        batchSize: def.batchSize,
        // Handlers answer `batchItemFailures`: one bad message does not redeliver its batch.
        reportBatchItemFailures: true,
        ...(maxConcurrency ? { maxConcurrency } : {}),
      }),
    );
    this.functions.set(def.name, fn);
  }

  private addSchedule(def: ScheduleDef): void {
    const { shared } = this.props;
    const id = pascal(def.name);
    const fn = new HouseFunction(this, `${id}Schedule`, {
      entry: def.handler,
      description: def.description,
      timeout: Duration.seconds(def.timeoutSeconds),
      paramsAndSecrets: secretsExtension(def.access, shared.keys),
      environment: { ...shared.environment, PUBLIC_BASE_URL: shared.api.baseUrl },
    });
    bindTable(fn, shared.table, def.access.table);
    if (def.access.bucket) bindBucket(fn, shared.bucket, def.access.bucket);
    for (const q of def.access.sendTo ?? []) bindQueue(fn, q, shared.plumbing.queue(q));
    bindKeyAccess(fn, def.access, shared.keys, shared.cdn, undefined, this.uploadSigner);
    functionAlarms(fn, shared.alarmAction, `The ${def.name} schedule`);
    // A run EventBridge could not start (after its retries), or one that still failed after
    // Lambda's retries, is kept here, with an alarm.
    const dlq = deadLetterQueue(this, `${id}ScheduleDlq`);
    // The rule invokes the function asynchronously: Lambda's own retries of a failed run, as the
    // manifest says (the local scheduler runs them too); the invocation record of a run that
    // failed them all goes to the schedule's dead-letter queue, not only to the Errors metric.
    fn.configureAsyncInvoke({
      retryAttempts: def.retriesOnFailure,
      maxEventAge: Duration.minutes(Math.max(1, def.everyMinutes)),
      onFailure: new destinations.SqsDestination(dlq),
    });
    this.scheduleDeadLetterQueues.set(def.name, dlq);
    acknowledge(dlq, 'AwsSolutions-SQS3', `This is the dead-letter queue of the ${def.name} schedule.`);
    dlqAlarm(this, `${id}ScheduleDlqAlarm`, dlq, shared.alarmAction, {
      threshold: 1,
      description: `A run of the ${def.name} schedule could not start or failed every retry (docs/operations.md)`,
    });
    new events.Rule(this, `${id}Rule`, {
      description: def.description,
      schedule: events.Schedule.rate(Duration.minutes(def.everyMinutes)),
      targets: [new targets.LambdaFunction(fn, { retryAttempts: 2, maxEventAge: Duration.minutes(Math.max(1, def.everyMinutes)), deadLetterQueue: dlq })],
    });
    this.functions.set(def.name, fn);
  }
}
