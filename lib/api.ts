import { Duration, Stack, aws_apigateway as apigw, aws_cloudwatch as cloudwatch, aws_iam as iam, aws_logs as logs } from 'aws-cdk-lib';
import { Construct } from 'constructs';
import { ROUTES, UNKNOWN_ROUTE, type RouteDef } from '../shared/manifest/routes';
import { longPollTimeoutSeconds } from '../shared/manifest/timeouts';
import { BINARY_MEDIA_TYPES, GATEWAY_RESPONSES, STAGE_NAME as API_STAGE_NAME, gatewayResponseTemplate, STAGE_THROTTLE, type GatewayResponseDef } from '../shared/http/edge';
import { apiWaf } from './edges/waf';
import { HouseFunction } from './constructs/house-function';
import { acknowledge } from './constructs/nag';
import { functionAlarms } from './monitoring/alarms';
import type { Limits } from './settings';

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
 *   - `cdk deploy -c longPollSeconds=60` once the quota increase is granted:
 *     LONG_POLL_MAX_SECONDS=60, the Lambda timeout 63 s and the integration timeout 64 s (the
 *     function stops first, as on every route: shared/manifest/timeouts.ts).
 * Every other route keeps the default 29 s integration timeout.
 *
 * Other REST API properties we rely on: per-stage access logging, execution logging at ERROR, a
 * WAF web ACL (lib/edges/waf.ts), throttling, `binaryMediaTypes`
 * for multipart uploads, an ANY method on every resource and on a root `{proxy+}` integrated with
 * the not-found function (so an unknown path or method answers D4's 404 with a request id in the
 * body and in X-Request-Id; see `addUnknownRouteMethods`), gateway responses in the D4 envelope for
 * what API Gateway answers itself (shared/http/edge.ts), and stage-level X-Ray tracing.
 * Authentication is not done by API Gateway: every route, signups included, has no authorizer;
 * the handler middleware checks hashed API keys / worker tokens (D5, D9), which an authorizer could
 * not do without a second table read and a cache that would outlive a revoke (D6).
 *
 * Stage: the manifest paths already start with `/v1` (or `/internal`), so the stage is named
 * `api` rather than `v1`: `https://<id>.execute-api.<region>.amazonaws.com/api/v1/jobs`. A custom
 * domain with an empty base path mapping hides the stage name.
 *
 * Split across stacks: the REST API, its stage, its resource tree (one resource per path segment
 * of the manifest) and its gateway responses live here, in the root stack; each route's Lambda and
 * method live in the nested stack of its domain (lib/domain-stack.ts). The deployment depends on
 * every method, wherever it is, so a deploy publishes them all.
 */

export const STAGE_NAME = API_STAGE_NAME;
/** Bodies API Gateway hands to Lambda base64-encoded: shared/http/edge.ts, which the local front reads too. */
export { BINARY_MEDIA_TYPES };

export interface ApiGatewayProps {
  /** D20 budget of long-poll routes, 1..60 seconds (context `longPollSeconds`). */
  longPollSeconds: number;
  /** Public base URL (e.g. a custom domain); defaults to the stage's execute-api URL. */
  publicBaseUrl?: string;
  limits: Limits;
  /** Where the not-found function's error and throttle alarms go (the stack's alarm topic). */
  alarmAction: cloudwatch.IAlarmAction;
}

/** The long-poll budget turned into timeouts (see the comment at the top of this file). */
export function longPollTimeouts(longPollSeconds: number): { integration: Duration; lambda: Duration } {
  const t = longPollTimeoutSeconds(longPollSeconds);
  return { integration: Duration.seconds(t.integration), lambda: Duration.seconds(t.fn) };
}

/** The REST API (root stack): stage, logs, WAF, gateway responses and one resource per manifest path. */
export class ApiGateway extends Construct {
  readonly restApi: apigw.RestApi;
  readonly apiName: string;
  /** Base URL the handlers put into links; the manifest paths are appended to it. */
  readonly baseUrl: string;
  readonly longPollSeconds: number;
  /** The function behind every path and method no route declares (the manifest's UNKNOWN_ROUTE). */
  readonly unknownRouteFunction: HouseFunction;
  private readonly resources = new Map<string, apigw.Resource>();

  constructor(scope: Construct, id: string, props: ApiGatewayProps) {
    super(scope, id);
    const stack = Stack.of(this);
    this.longPollSeconds = props.longPollSeconds;
    longPollTimeouts(props.longPollSeconds);

    const accessLogs = new logs.LogGroup(this, 'AccessLogs', { retention: logs.RetentionDays.ONE_MONTH });
    this.apiName = `${stack.stackName}-api`;
    this.restApi = new apigw.RestApi(this, 'RestApi', {
      restApiName: this.apiName,
      description: 'Media marketplace: buyer API (/v1) and worker API (/internal/worker)',
      endpointConfiguration: { types: [apigw.EndpointType.REGIONAL] },
      binaryMediaTypes: [...BINARY_MEDIA_TYPES],
      // Access and execution logs need the account-level API Gateway → CloudWatch Logs role.
      cloudWatchRole: true,
      deployOptions: {
        stageName: STAGE_NAME,
        accessLogDestination: new apigw.LogGroupLogDestination(accessLogs),
        accessLogFormat: apigw.AccessLogFormat.jsonWithStandardFields(),
        // Execution logs: errors only (integration failures, timeouts); never request bodies.
        loggingLevel: apigw.MethodLoggingLevel.ERROR,
        dataTraceEnabled: false,
        tracingEnabled: true,
        // Per-method metrics: the p99 latency alarm of each route reads them.
        metricsEnabled: true,
        // A stage-wide ceiling against floods; the per-key limits of D13 are enforced in the handlers.
        // Applied to each method on its own; the local front applies the same (local/stage-throttle.ts).
        throttlingRateLimit: STAGE_THROTTLE.ratePerSecond,
        throttlingBurstLimit: STAGE_THROTTLE.burst,
      },
    });
    // API Gateway writes execution logs to a group it names itself and would create with no
    // expiry: created here first (the stage waits for it) with the access logs' retention.
    const executionLogs = new logs.LogGroup(this, 'ExecutionLogs', {
      logGroupName: `API-Gateway-Execution-Logs_${this.restApi.restApiId}/${STAGE_NAME}`,
      retention: logs.RetentionDays.ONE_MONTH,
    });
    this.restApi.deploymentStage.node.addDependency(executionLogs);
    this.addGatewayResponses();
    acknowledge(this.restApi, 'AwsSolutions-APIG2', 'Requests are validated by zod in the handlers, which answer the API error envelope with field details.');
    acknowledge(this.restApi, 'AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/AmazonAPIGatewayPushToCloudWatchLogs]', 'The account-level role API Gateway needs to write access and execution logs.');
    apiWaf(this, 'Waf', { stage: this.restApi.deploymentStage, limits: props.limits });

    // Built from the id, not `restApi.url`, so functions do not depend on the deployment (which
    // depends on the methods, which depend on the functions).
    this.baseUrl =
      props.publicBaseUrl ?? `https://${this.restApi.restApiId}.execute-api.${stack.region}.${stack.urlSuffix}/${STAGE_NAME}`;

    for (const route of ROUTES) this.resources.set(route.path, this.restApi.root.resourceForPath(route.path));
    this.unknownRouteFunction = this.addUnknownRouteMethods(props.alarmAction);
  }

  /** The resource of a manifest path (created here, so the domain stacks never create one twice). */
  resource(path: string): apigw.Resource {
    const r = this.resources.get(path);
    if (!r) throw new Error(`no API resource for ${path}`);
    return r;
  }

  /**
   * Answers API Gateway gives by itself, in the D4 error envelope (their types, statuses and
   * messages are in shared/http/edge.ts, which the local front answers from too). The request id
   * is API Gateway's own (`req_<uuid>`): no handler ran, so there is no ULID to give, and a gateway
   * response cannot send one in X-Request-Id either (its headers are static values or request
   * parameters). An unknown route therefore goes to the not-found function instead
   * (`addUnknownRouteMethods`); MISSING_AUTHENTICATION_TOKEN stays as the fallback for whatever
   * reaches no method all the same.
   */
  private addGatewayResponses(): void {
    const add = (def: GatewayResponseDef) =>
      this.restApi.addGatewayResponse(def.id, {
        type: apigw.ResponseType.of(def.responseType),
        statusCode: def.status === undefined ? undefined : String(def.status),
        // A static header value is quoted (a bare name would be read as a request parameter).
        responseHeaders: def.headers ? Object.fromEntries(Object.entries(def.headers).map(([k, v]) => [k, `'${v}'`])) : undefined,
        templates: { 'application/json': gatewayResponseTemplate(def) },
      });
    for (const def of Object.values(GATEWAY_RESPONSES)) add(def);
  }

  /**
   * D4 deployed for unknown routes: an ANY method integrated with the not-found function
   * (functions/edge/not-found.ts) on every resource of the API (each manifest path and every
   * prefix of one, the root included) and on a root `{proxy+}`, which catches the paths no resource
   * matches. A method a route declares takes precedence over ANY on its resource, so only the
   * methods no route declares reach the function; its 404 carries a `req_<ULID>` in the body and in
   * X-Request-Id, which a gateway response cannot. The function is granted nothing: no table, no
   * secret, no key; its only permission is being invoked by this API.
   */
  private addUnknownRouteMethods(alarmAction: cloudwatch.IAlarmAction): HouseFunction {
    const stack = Stack.of(this);
    const fn = new HouseFunction(this, 'UnknownRouteFunction', {
      entry: UNKNOWN_ROUTE.handler,
      description: `ANY method no route declares, any path no route matches (${UNKNOWN_ROUTE.id})`,
      memorySize: 256,
      timeout: Duration.seconds(5),
    });
    functionAlarms(fn, alarmAction, 'The not-found function (unknown routes)');
    // Written out rather than LambdaIntegration, which would add one permission per method.
    const integration = new apigw.Integration({
      type: apigw.IntegrationType.AWS_PROXY,
      integrationHttpMethod: 'POST',
      uri: `arn:${stack.partition}:apigateway:${stack.region}:lambda:path/2015-03-31/functions/${fn.functionArn}/invocations`,
    });
    fn.addPermission('ApiInvoke', {
      principal: new iam.ServicePrincipal('apigateway.amazonaws.com'),
      sourceArn: this.restApi.arnForExecuteApi('*', '/*', STAGE_NAME),
    });
    const paths = new Set<string>(['/']);
    for (const route of ROUTES) {
      const segments = route.path.split('/').filter(Boolean);
      for (let i = 1; i <= segments.length; i++) paths.add(`/${segments.slice(0, i).join('/')}`);
    }
    const resources = [...paths].map((p) => (p === '/' ? this.restApi.root : this.restApi.root.resourceForPath(p)));
    resources.push(this.restApi.root.addResource('{proxy+}'));
    for (const resource of resources) {
      const method = resource.addMethod('ANY', integration, { operationName: UNKNOWN_ROUTE.id, authorizationType: apigw.AuthorizationType.NONE });
      acknowledge(method, 'AwsSolutions-APIG4', 'No authorizer by design: the method only answers 404 not_found, and reads nothing.');
      acknowledge(method, 'AwsSolutions-COG4', 'No Cognito: the method only answers 404 not_found, and reads nothing.');
    }
    return fn;
  }
}

/** The p99 latency above which a route alarms: the long-poll budget, uploads, everything else. */
export function latencyThresholdMs(route: RouteDef, longPollSeconds: number): number {
  if (route.longPoll) return (longPollSeconds + 2) * 1000;
  if (route.access.bucket === 'write') return 10_000;
  return 3_000;
}
