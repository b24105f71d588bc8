import {
  Duration,
  Stack,
  aws_apigateway as apigw,
  aws_dynamodb as dynamodb,
  aws_logs as logs,
  aws_s3 as s3,
} from 'aws-cdk-lib';
import { Construct } from 'constructs';
import { ROUTES, routeLogicalName, type RouteDef } from '../shared/manifest/routes';
import { bindBucket, bindKeyAccess, bindTable, grantSms, type CdnResources, type KeyResources } from './constructs/grants';
import { HouseFunction } from './constructs/house-function';

/*
 * Why an API Gateway REST API (regional) and not an HTTP API
 * ==========================================================
 * D20 lets a buyer long-poll `GET /v1/jobs/{job_id}` with `Prefer: wait=N` for up to 60 seconds.
 * An HTTP API has a hard 30-second integration timeout that no quota request raises, so on an
 * HTTP API the long poll could never exceed ~29 s. A REST API also defaults to 29 s, but for a
 * *regional* (or private) REST API the integration timeout can be raised beyond 29 s through a
 * Service Quotas request ("Maximum integration timeout in milliseconds"), at the cost of a lower
 * account-level throttle quota. The REST API therefore is the only API Gateway flavour that can
 * reach D20's full 60 s, and it is the one we deploy.
 *
 * The long-poll route's budget is the context value `longPollSeconds` (default 25, at most 60):
 *   - default 25: integration timeout 29 s (works in every account, no quota request), the
 *     handler gets LONG_POLL_MAX_SECONDS=25 and clamps `wait` to 25, announcing it in
 *     `Preference-Applied: wait=25` as D20 requires when the stack cannot hold 60 s;
 *   - `cdk deploy -c longPollSeconds=60` once the quota increase is granted: integration
 *     timeout 61 s, LONG_POLL_MAX_SECONDS=60, and the Lambda timeout above both.
 * Every other route keeps the default 29 s integration timeout.
 *
 * Other REST API properties we rely on: per-stage access logging and throttling, `binaryMediaTypes`
 * for multipart uploads, gateway responses (so unknown routes answer the D4 error envelope), and
 * stage-level X-Ray tracing. Authentication is not done by API Gateway: every route, signups
 * included, has no authorizer; the handler middleware checks hashed API keys / worker tokens
 * (D5, D9), which an authorizer could not do without a second table read and a cache that would
 * outlive a revoke (D6).
 *
 * Stage: the manifest paths already start with `/v1` (or `/internal`), so the stage is named
 * `api` rather than `v1`: `https://<id>.execute-api.<region>.amazonaws.com/api/v1/jobs`. A custom
 * domain with an empty base path mapping hides the stage name.
 */

export const STAGE_NAME = 'api';
/**
 * Bodies API Gateway hands to Lambda base64-encoded (`isBase64Encoded: true`): worker uploads
 * (multipart) and raw media. JSON stays text. Mirrors `isTextContentType` in `local/http.ts`.
 */
export const BINARY_MEDIA_TYPES = ['multipart/form-data', 'image/*', 'video/*', 'audio/*', 'application/octet-stream'];

/** API Gateway's default (and, without a quota increase, maximum) integration timeout. */
export const DEFAULT_INTEGRATION_TIMEOUT_SECONDS = 29;

export interface ApiProps {
  table: dynamodb.ITable;
  bucket: s3.IBucket;
  /** Variables every route function gets (never a secret). PUBLIC_BASE_URL is added here. */
  environment: Record<string, string>;
  /** D20 budget of long-poll routes, 1..60 seconds (context `longPollSeconds`). */
  longPollSeconds: number;
  /** Public base URL (e.g. a custom domain); defaults to the stage's execute-api URL. */
  publicBaseUrl?: string;
  keys: KeyResources;
  cdn: CdnResources;
}

/** The long-poll budget turned into timeouts (see the comment at the top of this file). */
export function longPollTimeouts(longPollSeconds: number): { integration: Duration; lambda: Duration } {
  if (!Number.isInteger(longPollSeconds) || longPollSeconds < 1 || longPollSeconds > 60) {
    throw new Error(`longPollSeconds must be an integer 1..60, got ${longPollSeconds}`);
  }
  return {
    integration: Duration.seconds(Math.max(DEFAULT_INTEGRATION_TIMEOUT_SECONDS, longPollSeconds + 1)),
    lambda: Duration.seconds(longPollSeconds + 5),
  };
}

/** The REST API: one Lambda and one method per manifest route (`shared/manifest/routes.ts`). */
export class Api extends Construct {
  readonly restApi: apigw.RestApi;
  /** Base URL the handlers put into links; the manifest paths are appended to it. */
  readonly baseUrl: string;
  /** Route functions by route id. */
  readonly functions = new Map<string, HouseFunction>();

  constructor(scope: Construct, id: string, props: ApiProps) {
    super(scope, id);
    const stack = Stack.of(this);

    const accessLogs = new logs.LogGroup(this, 'AccessLogs', { retention: logs.RetentionDays.ONE_MONTH });
    this.restApi = new apigw.RestApi(this, 'RestApi', {
      restApiName: `${stack.stackName}-api`,
      description: 'Media marketplace: buyer API (/v1) and worker API (/internal/worker)',
      endpointConfiguration: { types: [apigw.EndpointType.REGIONAL] },
      binaryMediaTypes: BINARY_MEDIA_TYPES,
      // Access logs need the account-level API Gateway → CloudWatch Logs role.
      cloudWatchRole: true,
      deployOptions: {
        stageName: STAGE_NAME,
        accessLogDestination: new apigw.LogGroupLogDestination(accessLogs),
        accessLogFormat: apigw.AccessLogFormat.jsonWithStandardFields(),
        tracingEnabled: true,
        metricsEnabled: true,
        // A stage-wide ceiling against floods; the per-key limits of D13 are enforced in the handlers.
        throttlingRateLimit: 200,
        throttlingBurstLimit: 400,
      },
    });
    this.addGatewayResponses();

    // Built from the id, not `restApi.url`, so functions do not depend on the deployment (which
    // depends on the methods, which depend on the functions).
    this.baseUrl =
      props.publicBaseUrl ??
      `https://${this.restApi.restApiId}.execute-api.${stack.region}.${stack.urlSuffix}/${STAGE_NAME}`;

    const longPoll = longPollTimeouts(props.longPollSeconds);
    for (const route of ROUTES) {
      const fn = this.routeFunction(route, props, longPoll.lambda);
      const resource = this.restApi.root.resourceForPath(route.path);
      resource.addMethod(
        route.method,
        new apigw.LambdaIntegration(fn, {
          proxy: true,
          allowTestInvoke: false,
          timeout: route.longPoll ? longPoll.integration : undefined,
        }),
        { operationName: route.id, authorizationType: apigw.AuthorizationType.NONE },
      );
    }
  }

  private routeFunction(route: RouteDef, props: ApiProps, longPollLambdaTimeout: Duration): HouseFunction {
    const fn = new HouseFunction(this, routeLogicalName(route), {
      entry: route.handler,
      description: `${route.method} ${route.path} (${route.id})`,
      // Below the 29 s integration timeout, so a stuck handler ends in its own log, not a 504.
      timeout: route.longPoll ? longPollLambdaTimeout : Duration.seconds(28),
      environment: {
        ...props.environment,
        PUBLIC_BASE_URL: this.baseUrl,
        ...(route.longPoll ? { LONG_POLL_MAX_SECONDS: String(props.longPollSeconds) } : {}),
      },
    });
    bindTable(fn, props.table, route.access.table);
    if (route.access.bucket) bindBucket(fn, props.bucket, route.access.bucket);
    if (route.access.sms) grantSms(fn);
    bindKeyAccess(fn, route.access, props.keys, props.cdn);
    this.functions.set(route.id, fn);
    return fn;
  }

  /**
   * Answers API Gateway gives by itself, in the D4 error envelope. A REST API answers an unknown
   * path or method with 403 "Missing Authentication Token"; D4 wants 404 `not_found`. The request
   * id is API Gateway's own (`req_<uuid>`): no handler ran, so there is no ULID to give.
   */
  private addGatewayResponses(): void {
    // `$context.error.messageString` is the message already quoted as a JSON string.
    const envelope = (type: string, message?: string) =>
      `{"error":{"type":"${type}","message":${message ? JSON.stringify(message) : '$context.error.messageString'},` +
      `"request_id":"req_$context.requestId"}}`;
    const add = (id: string, type: apigw.ResponseType, errorType: string, opts: { statusCode?: string; message?: string; headers?: Record<string, string> } = {}) =>
      this.restApi.addGatewayResponse(id, {
        type,
        statusCode: opts.statusCode,
        responseHeaders: opts.headers,
        templates: { 'application/json': envelope(errorType, opts.message) },
      });

    add('UnknownRoute', apigw.ResponseType.MISSING_AUTHENTICATION_TOKEN, 'not_found', { statusCode: '404', message: 'No such route.' });
    add('Throttled', apigw.ResponseType.THROTTLED, 'rate_limit_exceeded', { statusCode: '429', headers: { 'Retry-After': "'1'" } });
    add('IntegrationTimeout', apigw.ResponseType.INTEGRATION_TIMEOUT, 'internal_error', { message: 'The request timed out.' });
    // The defaults keep API Gateway's status code (413, 415, 502, ...) and only change the body.
    add('Default4xx', apigw.ResponseType.DEFAULT_4XX, 'invalid_request');
    add('Default5xx', apigw.ResponseType.DEFAULT_5XX, 'internal_error', { message: 'Internal error.' });
  }
}
