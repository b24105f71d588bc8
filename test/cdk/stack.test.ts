/**
 * CDK assertions on the synthesized template. The stack is driven by the manifests, so each rule
 * is checked against them (a route added to `shared/manifest/routes.ts` is covered by itself).
 * Bundling is skipped (`aws:cdk:bundling-stacks: []`), but every handler module the manifests
 * name must exist: NodejsFunction checks its entry file.
 */
import { App } from 'aws-cdk-lib';
import { Annotations, Match, Template } from 'aws-cdk-lib/assertions';
import { MarketplaceStack, type MarketplaceStackProps } from '../../lib/stack';
import { ROUTES, UNKNOWN_ROUTE, routeById, routeLogicalName, type RouteDef } from '../../shared/manifest/routes';
import { GATEWAY_RESPONSES, gatewayResponseTemplate, STAGE_THROTTLE } from '../../shared/http/edge';
import { STREAM_RULES, TABLE_STREAM, streamRulePattern, QUEUES, RULES, SCHEDULES, TRANSCRIBE_JOB_PREFIX, queueByName } from '../../shared/manifest/wiring';
import { DEFAULT_BEDROCK_MODEL_ID } from '../../shared/scoring/bedrock-reply';
import { TABLE_DEF } from '../../shared/db/table';
import { ROUTE_FUNCTION_TIMEOUT_SECONDS } from '../../shared/manifest/timeouts';
import { DEPLOY_CONTEXT } from './fixtures/context';
import { CDK_CONTEXT, FFMPEG_LAYER_ARN, flatten, synthesize, type Resource } from './support';
import { allows, checkGrantedCall, withGrants, type BucketAction } from '../../local/grants';
import { grantsOf, type EntryAccess } from '../../local/lambda';
import { REQUEST_COUNT_ATTRIBUTES, WAIT_SLOT_ATTRIBUTES, type BucketAccess } from '../../shared/manifest/access';
import { SECRET_COUNTER } from '../../shared/ratelimit';
import { encryptionContext, LEGACY_ENCRYPTION_CONTEXT, SEALING_PURPOSES } from '../../shared/secrets/kms';

/** Whether an IAM pattern (`*` wildcards) matches an action or a resource path. */
const iamGlob = (pattern: string, value: string) => new RegExp(`^${pattern.split('*').map((x) => x.replace(/[.+?^${}()|[\]\\]/g, '\\$&')).join('.*')}$`).test(value);

/** The stack as `cdk synth` builds it, with the ffmpeg layer unless the context says otherwise. */
function synthStack(context: Record<string, unknown> = {}, props: MarketplaceStackProps = {}): MarketplaceStack {
  const merged: Record<string, unknown> = { ...CDK_CONTEXT, ...DEPLOY_CONTEXT, ffmpegLayerArn: FFMPEG_LAYER_ARN, ...context, 'aws:cdk:bundling-stacks': [] };
  for (const k of Object.keys(merged)) if (merged[k] === undefined) delete merged[k];
  const app = new App({ context: merged });
  return new MarketplaceStack(app, 'TestStack', {
    longPollSeconds: context.longPollSeconds as number | undefined,
    ...props,
  });
}

/**
 * The root stack and its nested stacks as one template (support.ts `flatten`: nested parameters
 * replaced by what the root passes), so each rule is checked wherever its resource lives.
 */
function synth(context: Record<string, unknown> = {}): Template {
  const s = synthesize(context);
  const outputs = s.templates.get(s.stack.node.path)!.template.toJSON().Outputs;
  return Template.fromJSON({ Resources: flatten(s), Outputs: outputs }, { skipCyclicalDependenciesCheck: true });
}

const template = synth();
const resources = template.toJSON().Resources as Record<string, Resource>;
const ofType = (type: string): [string, Resource][] => Object.entries(resources).filter(([, r]) => r.Type === type);
const WRITE_ACTIONS = ['dynamodb:PutItem', 'dynamodb:UpdateItem', 'dynamodb:DeleteItem', 'dynamodb:BatchWriteItem'];

/** The Lambda of a route: its description ends with `(<route id>)`. */
function routeFunction(route: RouteDef, res = resources): [string, Resource] {
  const matches = Object.entries(res).filter(
    ([, r]) => r.Type === 'AWS::Lambda::Function' && String(r.Properties.Description).endsWith(`(${route.id})`),
  );
  expect(matches).toHaveLength(1);
  return matches[0]!;
}

function functionByDescription(fragment: string): [string, Resource] {
  const matches = ofType('AWS::Lambda::Function').filter(([, r]) => String(r.Properties.Description).includes(fragment));
  expect(matches).toHaveLength(1);
  return matches[0]!;
}

/** Every IAM action granted to a function's role, across all policies attached to it. */
function actionsOf(fnLogicalId: string): string[] {
  const roleId = resources[fnLogicalId]!.Properties.Role['Fn::GetAtt'][0] as string;
  return ofType('AWS::IAM::Policy')
    .filter(([, p]) => (p.Properties.Roles as unknown[]).some((r) => JSON.stringify(r) === JSON.stringify({ Ref: roleId })))
    .flatMap(([, p]) => p.Properties.PolicyDocument.Statement as { Action: string | string[]; Effect: string }[])
    .filter((s) => s.Effect === 'Allow')
    .flatMap((s) => (Array.isArray(s.Action) ? s.Action : [s.Action]));
}

function statementsOf(fnLogicalId: string): { Action: string | string[]; Resource: unknown }[] {
  const roleId = resources[fnLogicalId]!.Properties.Role['Fn::GetAtt'][0] as string;
  return ofType('AWS::IAM::Policy')
    .filter(([, p]) => (p.Properties.Roles as unknown[]).some((r) => JSON.stringify(r) === JSON.stringify({ Ref: roleId })))
    .flatMap(([, p]) => p.Properties.PolicyDocument.Statement);
}

/** Rebuild a method's path from its resource chain (PathPart / ParentId up to the root). */
function methodPath(method: Resource): string {
  const parts: string[] = [];
  let ref = method.Properties.ResourceId as { Ref?: string };
  while (ref && ref.Ref) {
    const res = resources[ref.Ref]!;
    parts.unshift(res.Properties.PathPart as string);
    ref = res.Properties.ParentId;
  }
  return '/' + parts.join('/');
}

function queueLogicalId(name: string): string {
  const id = `${routeLogicalName({ id: name })}Queue`;
  const matches = ofType('AWS::SQS::Queue').filter(([lid]) => lid.startsWith(`Pipeline${id}`));
  expect(matches).toHaveLength(1);
  return matches[0]![0];
}

/** The not-found function (the manifest's UNKNOWN_ROUTE), behind every ANY method. */
const unknownRouteFunction = (): [string, Resource] => functionByDescription(`(${UNKNOWN_ROUTE.id})`);

describe('functions', () => {
  test('exactly one Lambda per manifest route, per queue consumer and per schedule, one for unknown routes, and no others', () => {
    // The manifest's UNKNOWN_ROUTE is the one function that is no route, consumer or schedule.
    template.resourceCountIs('AWS::Lambda::Function', ROUTES.length + QUEUES.length + SCHEDULES.length + 1);
    for (const route of ROUTES) routeFunction(route);
    for (const q of QUEUES) functionByDescription(`Consumer of the ${q.name} queue`);
    for (const s of SCHEDULES) functionByDescription(s.description);
    unknownRouteFunction();
  });

  test('recursive loop detection: a consumer whose designed loop re-sends to its own queue (the webhooks retries, the sandbox ticks) is allowed to loop; every other function keeps Lambda\'s Terminate', () => {
    const allowed = QUEUES.filter((q) => q.recursiveLoop === 'allow').map((q) => q.name);
    expect(allowed.sort()).toEqual(['sandbox', 'webhooks']);
    const allowing = new Set(allowed.map((n) => functionByDescription(`Consumer of the ${n} queue`)[0]));
    for (const [id, r] of ofType('AWS::Lambda::Function')) {
      if (allowing.has(id)) expect(r.Properties.RecursiveLoop).toBe('Allow');
      else expect(r.Properties.RecursiveLoop ?? 'Terminate').toBe('Terminate');
    }
  });

  test('a consumer that sends to its own queue declares whether its loop may exceed Lambda\'s 16 invocations', () => {
    // scoring re-sends to itself only when a transcription is started again (a few times at most):
    // it keeps Lambda's guard. A new self-sending consumer must be looked at and added here.
    const selfSending = QUEUES.filter((q) => q.access.sendTo?.includes(q.name)).map((q) => `${q.name}:${q.recursiveLoop ?? 'terminate'}`);
    expect(selfSending.sort()).toEqual(['sandbox:allow', 'scoring:terminate', 'webhooks:allow']);
  });

  test('no custom resources (they would bring their own Lambdas)', () => {
    const custom = Object.values(resources).filter(
      (r) => r.Type.startsWith('Custom::') || r.Type === 'AWS::CloudFormation::CustomResource',
    );
    expect(custom).toEqual([]);
  });

  test('every Lambda runs nodejs22.x on arm64, traced, logging to its own log group', () => {
    for (const [, fn] of ofType('AWS::Lambda::Function')) {
      expect(fn.Properties.Runtime).toBe('nodejs22.x');
      expect(fn.Properties.Architectures).toEqual(['arm64']);
      expect(fn.Properties.TracingConfig).toEqual({ Mode: 'Active' });
      expect(fn.Properties.LoggingConfig.LogGroup).toEqual({ Ref: expect.any(String) });
      expect(fn.Properties.Environment.Variables.NODE_OPTIONS).toBe('--enable-source-maps');
    }
    template.allResourcesProperties('AWS::Logs::LogGroup', { RetentionInDays: 30 });
  });

  test('the stack never sets RUNTIME; every function but the not-found one gets TABLE_NAME and PUBLIC_BASE_URL, and no CURSOR_SECRET', () => {
    const [unknownId] = unknownRouteFunction();
    for (const [id, fn] of ofType('AWS::Lambda::Function')) {
      const env = fn.Properties.Environment.Variables;
      expect(env.RUNTIME).toBeUndefined();
      expect(env.LOCAL_FIXED_OTP).toBeUndefined();
      expect(env.CURSOR_SECRET).toBeUndefined();
      expect(env.WEBHOOK_SECRET_KEY).toBeUndefined();
      if (id === unknownId) {
        // It reads no table and links nowhere: it answers 404 from the request's method and path alone.
        expect([env.TABLE_NAME, env.PUBLIC_BASE_URL]).toEqual([undefined, undefined]);
        continue;
      }
      expect(env.TABLE_NAME).toEqual({ Ref: expect.stringMatching(/^DataTable/) });
      expect(env.PUBLIC_BASE_URL).toBeDefined();
    }
  });
});

describe('API', () => {
  test('one regional REST API with no authorizer, access logs, throttling and multipart as binary', () => {
    template.resourceCountIs('AWS::ApiGateway::RestApi', 1);
    template.resourceCountIs('AWS::ApiGateway::Authorizer', 0);
    template.hasResourceProperties('AWS::ApiGateway::RestApi', {
      EndpointConfiguration: { Types: ['REGIONAL'] },
      BinaryMediaTypes: Match.arrayWith(['multipart/form-data']),
    });
    template.hasResourceProperties('AWS::ApiGateway::Stage', {
      StageName: 'api',
      AccessLogSetting: { DestinationArn: Match.anyValue(), Format: Match.anyValue() },
      TracingEnabled: true,
      // Every method of the stage, each on its own bucket, as the local front throttles (local/stage-throttle.ts).
      MethodSettings: [Match.objectLike({ ResourcePath: '/*', HttpMethod: '*', ThrottlingRateLimit: STAGE_THROTTLE.ratePerSecond, ThrottlingBurstLimit: STAGE_THROTTLE.burst })],
    });
  });

  test('exactly one method per manifest route, on the manifest path, as a Lambda proxy without authorizer', () => {
    // Besides them only the ANY methods of unknown routes (their own test below).
    const methods = ofType('AWS::ApiGateway::Method').filter(([, m]) => m.Properties.OperationName !== UNKNOWN_ROUTE.id);
    expect(methods).toHaveLength(ROUTES.length);
    for (const route of ROUTES) {
      const found = methods.filter(([, m]) => m.Properties.OperationName === route.id);
      expect(found).toHaveLength(1);
      const [, method] = found[0]!;
      expect(method.Properties.HttpMethod).toBe(route.method);
      expect(method.Properties.AuthorizationType).toBe('NONE');
      expect(method.Properties.Integration.Type).toBe('AWS_PROXY');
      expect(methodPath(method)).toBe(route.path);
      // The integration invokes this route's own function.
      const [fnId] = routeFunction(route);
      expect(JSON.stringify(method.Properties.Integration.Uri)).toContain(`"${fnId}"`);
    }
  });

  test('the purchase route and its alias are two entries, so two Lambdas on one handler module', () => {
    const [a] = routeFunction(routeById('billing.purchase'));
    const [b] = routeFunction(routeById('billing.purchase_alias'));
    expect(a).not.toBe(b);
  });

  test('unknown routes answer 404 not_found in the error envelope (D4), not 403', () => {
    // The fallback for whatever reaches no ANY method: API Gateway's request id, no X-Request-Id.
    template.hasResourceProperties('AWS::ApiGateway::GatewayResponse', {
      ResponseType: 'MISSING_AUTHENTICATION_TOKEN',
      StatusCode: '404',
      ResponseTemplates: { 'application/json': Match.stringLikeRegexp('"type":"not_found"') },
    });
  });

  test('D4 deployed for unknown routes: every manifest resource (each path, every prefix, the root) has an ANY method to the not-found function, and a root {proxy+} has one too', () => {
    const [fnId] = unknownRouteFunction();
    const anyMethods = ofType('AWS::ApiGateway::Method').filter(([, m]) => m.Properties.HttpMethod === 'ANY');
    const prefixes = new Set<string>(['/']);
    for (const r of ROUTES) {
      const segments = r.path.split('/').filter(Boolean);
      for (let i = 1; i <= segments.length; i++) prefixes.add(`/${segments.slice(0, i).join('/')}`);
    }
    const pathOf = (m: Resource) => (m.Properties.ResourceId?.['Fn::GetAtt'] ? '/' : methodPath(m));
    const covered = anyMethods.map(([, m]) => pathOf(m)).sort();
    expect(covered).toEqual([...prefixes, '/{proxy+}'].sort());
    for (const [, m] of anyMethods) {
      expect([pathOf(m), m.Properties.OperationName, m.Properties.AuthorizationType, m.Properties.Integration.Type]).toEqual([pathOf(m), UNKNOWN_ROUTE.id, 'NONE', 'AWS_PROXY']);
      expect(JSON.stringify(m.Properties.Integration.Uri)).toContain(`"${fnId}"`);
    }
    // The greedy resource sits on the root, so it takes every path no resource matches.
    const [, proxy] = ofType('AWS::ApiGateway::Resource').find(([, r]) => r.Properties.PathPart === '{proxy+}')!;
    expect(proxy.Properties.ParentId).toEqual({ 'Fn::GetAtt': [expect.stringMatching(/^ApiRestApi/), 'RootResourceId'] });
  });

  test('least privilege: the not-found function is granted nothing (no table, bucket, queue, secret or key); only this API may invoke it', () => {
    const [fnId, fn] = unknownRouteFunction();
    // What every function has: its logs (the managed basic role) and active tracing.
    expect(actionsOf(fnId).sort()).toEqual(['xray:PutTelemetryRecords', 'xray:PutTraceSegments']);
    expect(fn.Properties.Layers).toBeUndefined();
    const permissions = ofType('AWS::Lambda::Permission').filter(([, p]) => JSON.stringify(p.Properties.FunctionName).includes(`"${fnId}"`));
    expect(permissions).toHaveLength(1);
    const [, permission] = permissions[0]!;
    expect(permission.Properties.Principal).toBe('apigateway.amazonaws.com');
    expect(JSON.stringify(permission.Properties.SourceArn)).toContain('/api/*/*');
  });

  test('the gateway responses are the ones the local front answers (shared/http/edge.ts), in the D4 envelope with API Gateway\'s request id', () => {
    const responses = ofType('AWS::ApiGateway::GatewayResponse');
    expect(responses).toHaveLength(Object.keys(GATEWAY_RESPONSES).length);
    for (const def of Object.values(GATEWAY_RESPONSES)) {
      const found = responses.filter(([, r]) => r.Properties.ResponseType === def.responseType);
      expect([def.id, found.length]).toEqual([def.id, 1]);
      const [, r] = found[0]!;
      expect([def.id, r.Properties.StatusCode, r.Properties.ResponseTemplates]).toEqual([
        def.id,
        def.status === undefined ? undefined : String(def.status),
        { 'application/json': gatewayResponseTemplate(def) },
      ]);
      expect(r.Properties.ResponseTemplates['application/json']).toContain('"request_id":"req_$context.requestId"');
    }
  });

  test('long poll (D20) defaults to 25 s: integration timeout 29 s, LONG_POLL_MAX_SECONDS=25', () => {
    const longPoll = ROUTES.filter((r) => r.longPoll);
    expect(longPoll.length).toBeGreaterThan(0);
    for (const route of ROUTES) {
      const [, method] = ofType('AWS::ApiGateway::Method').find(([, m]) => m.Properties.OperationName === route.id)!;
      const [, fn] = routeFunction(route);
      if (route.longPoll) {
        expect(method.Properties.Integration.TimeoutInMillis).toBe(29_000);
        expect(fn.Properties.Environment.Variables.LONG_POLL_MAX_SECONDS).toBe('25');
        expect(fn.Properties.Timeout).toBeGreaterThan(25);
        expect(fn.Properties.Timeout).toBeLessThan(29); // stops before the integration: 502, not 504
      } else {
        expect(method.Properties.Integration.TimeoutInMillis).toBeUndefined();
        expect(fn.Properties.Environment.Variables.LONG_POLL_MAX_SECONDS).toBeUndefined();
        expect(fn.Properties.Timeout).toBe(ROUTE_FUNCTION_TIMEOUT_SECONDS);
        expect(fn.Properties.Timeout).toBeLessThan(29);
      }
    }
  });

  test('long poll with context longPollSeconds=60: LONG_POLL_MAX_SECONDS=60, the Lambda 63 s, the integration timeout one second more', () => {
    const res = synth({ longPollSeconds: 60 }).toJSON().Resources as Record<string, Resource>;
    for (const route of ROUTES.filter((r) => r.longPoll)) {
      const [, method] = Object.entries(res).find(
        ([, m]) => m.Type === 'AWS::ApiGateway::Method' && m.Properties.OperationName === route.id,
      )!;
      const [, fn] = routeFunction(route, res);
      expect(method.Properties.Integration.TimeoutInMillis).toBe(64_000);
      expect(fn.Properties.Environment.Variables.LONG_POLL_MAX_SECONDS).toBe('60');
      expect(fn.Properties.Timeout).toBe(63);
    }
  });
});

describe('least privilege', () => {
  test('read-only routes get no DynamoDB write actions (e.g. jobs.list has no dynamodb:PutItem), only the request count (and their idempotency records)', () => {
    const readOnly = ROUTES.filter((r) => r.access.table === 'read');
    expect(readOnly.map((r) => r.id)).toContain('jobs.list');
    type Stmt = { Action: string | string[]; Effect: string; Condition?: Record<string, Record<string, unknown>> };
    for (const route of readOnly) {
      const [fnId] = routeFunction(route);
      expect(actionsOf(fnId)).toContain('dynamodb:Query');
      const statements = (statementsOf(fnId) as unknown as Stmt[]).filter((st) => st.Effect === 'Allow');
      const unconditioned = statements.filter((st) => !st.Condition).flatMap((st) => (Array.isArray(st.Action) ? st.Action : [st.Action]));
      for (const a of WRITE_ACTIONS) expect(unconditioned).not.toContain(a);
      // Authentication counts the request (UpdateItem) on the secret's item, a rate-limit window
      // or the key's record (last_used_at): nothing else, by partition key.
      // A long-poll route also holds its wait slots (shared/long-poll-slots.ts): their items only,
      // naming only their keys and slots. A route that takes an Idempotency-Key writes its records
      // (files.refresh_url): those items only.
      // (The sealing key's statements are conditioned too: on its encryption context.)
      const actions = (st: Stmt) => (Array.isArray(st.Action) ? st.Action : [st.Action]);
      const conditioned = statements.filter((st) => st.Condition && actions(st).some((a) => a.startsWith('dynamodb:')));
      expect(conditioned.flatMap(actions)).toEqual([
        ...(route.rateLimit === 'none' ? [] : ['dynamodb:UpdateItem']),
        ...(route.longPoll ? ['dynamodb:UpdateItem'] : []),
        ...(route.idempotency === 'none' ? [] : ['dynamodb:DeleteItem', 'dynamodb:PutItem', 'dynamodb:UpdateItem']),
      ]);
      expect(conditioned.map((st) => st.Condition)).toEqual([
        ...(route.rateLimit === 'none'
          ? []
          : [{ 'ForAllValues:StringLike': { 'dynamodb:LeadingKeys': ['SECRET#*', 'RL#*', 'ORG#*'] }, 'ForAllValues:StringEquals': { 'dynamodb:Attributes': [...REQUEST_COUNT_ATTRIBUTES] } }]),
        ...(route.longPoll ? [{ 'ForAllValues:StringLike': { 'dynamodb:LeadingKeys': ['LPW#*'] }, 'ForAllValues:StringEquals': { 'dynamodb:Attributes': [...WAIT_SLOT_ATTRIBUTES] } }] : []),
        ...(route.idempotency === 'none' ? [] : [{ 'ForAllValues:StringLike': { 'dynamodb:LeadingKeys': ['IDEM#*'] } }]),
      ]);
    }
    // files.refresh_url signs a URL and keeps its answer for replays: it writes nothing else.
    expect(readOnly.filter((r) => r.idempotency !== 'none').map((r) => r.id)).toEqual(['files.refresh_url']);
    // The counters and the table's keys, nothing a secret or an organization holds otherwise.
    for (const a of ['PK', 'SK', SECRET_COUNTER.hour, SECRET_COUNTER.total, SECRET_COUNTER.minute(0), SECRET_COUNTER.minute(59), 'n', 'm0', 'm59', 'ttl', 'last_used_at']) {
      expect(REQUEST_COUNT_ATTRIBUTES).toContain(a);
    }
    for (const a of ['scopes', 'principal', 'org_id', 'environment', 'not_after', 'available_cents', 'tier', 'secret_hash']) expect(REQUEST_COUNT_ATTRIBUTES).not.toContain(a);
    for (const route of ROUTES.filter((r) => r.access.table === 'write')) {
      expect(actionsOf(routeFunction(route)[0])).toContain('dynamodb:PutItem');
    }
  });

  test('the public documentation routes hold no DynamoDB action at all (they read nothing of the table)', () => {
    const docs = ROUTES.filter((r) => r.id.startsWith('docs.'));
    expect(docs.map((r) => r.id).sort()).toEqual(['docs.asset', 'docs.openapi', 'docs.page']);
    for (const route of docs) expect(actionsOf(routeFunction(route)[0]).filter((a) => a.startsWith('dynamodb:'))).toEqual([]);
  });

  test('only the phone verification route may sns:Publish', () => {
    const smsRoutes = ROUTES.filter((r) => r.access.sms).map((r) => r.id);
    expect(smsRoutes).toEqual(['auth.phone_verification.start']);
    for (const [fnId, fn] of ofType('AWS::Lambda::Function')) {
      const mayPublish = actionsOf(fnId).includes('sns:Publish');
      const isSmsRoute = smsRoutes.some((id) => String(fn.Properties.Description).endsWith(`(${id})`));
      expect({ fn: fn.Properties.Description, mayPublish }).toEqual({ fn: fn.Properties.Description, mayPublish: isSmsRoute });
    }
  });

  test('the phone verification route may publish to phone numbers only: Publish on every SNS ARN (topics, endpoints) is denied', () => {
    const [fnId] = routeFunction(ROUTES.find((r) => r.access.sms)!);
    const statements = (statementsOf(fnId) as { Action: string | string[]; Resource: unknown; Effect: string }[]).filter((s) => [s.Action].flat().includes('sns:Publish'));
    expect(statements.find((s) => s.Effect === 'Allow')?.Resource).toBe('*');
    const deny = statements.find((s) => s.Effect === 'Deny');
    expect(JSON.stringify(deny?.Resource)).toMatch(/:sns:\*:\*:\*"/);
  });

  test('bucket access and BUCKET_NAME follow the manifest (no route reads objects: downloads go through the CDN; only write routes put)', () => {
    for (const route of ROUTES) {
      const [fnId, fn] = routeFunction(route);
      const actions = actionsOf(fnId);
      const mode = route.access.bucket;
      expect(fn.Properties.Environment.Variables.BUCKET_NAME !== undefined).toBe(mode !== undefined);
      expect([route.id, actions.some((a) => a.startsWith('s3:GetObject'))]).toEqual([route.id, false]);
      expect(actions.includes('s3:PutObject')).toBe(mode === 'write');
      expect([route.id, actions.some((a) => a.startsWith('s3:DeleteObject'))]).toEqual([route.id, false]);
    }
  });

  test('the upload and retry routes may only put and tag objects under uploads/, and tag keyframes', () => {
    const writers = ROUTES.filter((r) => r.access.bucket === 'write');
    expect(writers.map((r) => r.id).sort()).toEqual(['worker.submissions.retry', 'worker.submissions.upload']);
    for (const route of writers) {
      const s3Statements = statementsOf(routeFunction(route)[0]).filter((st) => [st.Action].flat().some((a) => a.startsWith('s3:') && a !== 's3:ListBucket'));
      expect(s3Statements).toHaveLength(2);
      // Tagging: a rejection the request itself decides (the fan-in can complete there) tags its bytes for the lifecycle.
      expect(s3Statements[0]!.Action).toEqual(['s3:PutObject', 's3:PutObjectTagging']);
      expect(JSON.stringify(s3Statements[0]!.Resource)).toContain('/uploads/*');
      // ... and the keyframes of the round's videos, which the lifecycle rule then deletes with them.
      expect([s3Statements[1]!.Action].flat()).toEqual(['s3:PutObjectTagging']);
      expect(JSON.stringify(s3Statements[1]!.Resource)).toContain('/keyframes/*');
      // Listing only so that tagging bytes that never landed answers 404, not 403.
      expect(actionsOf(routeFunction(route)[0]).filter((a) => a.startsWith('s3:')).sort()).toEqual(['s3:ListBucket', 's3:PutObject', 's3:PutObjectTagging', 's3:PutObjectTagging']);
    }
  });

  test('the local runtime refuses exactly the KMS, Bedrock, Transcribe and SNS calls the synthesized policies do not allow (local/grants.ts)', () => {
    // Each call with a resource the deployed grant names (the configured model, one of our job
    // names), so the comparison is by action; the resource rules have tests of their own.
    const model = { modelId: DEFAULT_BEDROCK_MODEL_ID };
    const calls: [client: string, command: string, iamAction: string, input?: object][] = [
      // With each purpose's encryption context, and the one all purposes shared before, which the
      // deployed statements require by condition (compared below); Encrypt and ReEncrypt are granted to no function.
      ...[...SEALING_PURPOSES.map(encryptionContext), LEGACY_ENCRYPTION_CONTEXT].flatMap((EncryptionContext): [string, string, string, object][] => [
        ['KMSClient', 'GenerateDataKeyCommand', 'kms:GenerateDataKey', { EncryptionContext }],
        ['KMSClient', 'DecryptCommand', 'kms:Decrypt', { EncryptionContext }],
      ]),
      ['BedrockRuntimeClient', 'ConverseCommand', 'bedrock:InvokeModel', model],
      ['BedrockRuntimeClient', 'InvokeModelCommand', 'bedrock:InvokeModel', model],
      ['BedrockRuntimeClient', 'ConverseStreamCommand', 'bedrock:InvokeModelWithResponseStream', model],
      ['TranscribeClient', 'StartTranscriptionJobCommand', 'transcribe:StartTranscriptionJob', { TranscriptionJobName: `${TRANSCRIBE_JOB_PREFIX}file_1` }],
      ['SNSClient', 'PublishCommand', 'sns:Publish', { PhoneNumber: '+15555550100' }],
    ];
    const functions: [string, EntryAccess, string][] = [
      ...ROUTES.map((r) => [r.id, r.access, routeFunction(r)[0]] as [string, EntryAccess, string]),
      ...QUEUES.map((q) => [q.name, q.access, functionByDescription(`Consumer of the ${q.name} queue`)[0]] as [string, EntryAccess, string]),
      ...SCHEDULES.map((s) => [s.name, s.access, functionByDescription(s.description)[0]] as [string, EntryAccess, string]),
    ];
    /** A call as reported: the IAM action, with the purpose of its encryption context. */
    const labelOf = ([, , iamAction, input]: (typeof calls)[number]) => `${iamAction}${(input as { EncryptionContext?: { purpose: string } } | undefined)?.EncryptionContext ? ` (${(input as { EncryptionContext: { purpose: string } }).EncryptionContext.purpose})` : ''}`;
    const seen = new Set<string>();
    for (const [name, access, fnId] of functions) {
      const statements = statementsOf(fnId);
      for (const [client, command, iamAction, input] of calls) {
        // Every call above is to a resource no Deny names (a phone number is no SNS ARN). A KMS
        // statement's condition names the encryption context it allows.
        const contextHolds = (st: { Condition?: { StringEquals?: Record<string, string> } }) =>
          Object.entries(st.Condition?.StringEquals ?? {})
            .filter(([k]) => k.startsWith('kms:EncryptionContext:'))
            .every(([k, v]) => (input as { EncryptionContext?: Record<string, string> } | undefined)?.EncryptionContext?.[k.slice('kms:EncryptionContext:'.length)] === v);
        const deployed = statements.some((st) => (st as { Effect?: string }).Effect !== 'Deny' && [st.Action].flat().some((a) => iamGlob(a, iamAction)) && contextHolds(st as never));
        const label = labelOf([client, command, iamAction, input]);
        let local = true;
        try {
          withGrants(grantsOf(name, access), () => checkGrantedCall(client, command, input ?? {}));
        } catch {
          local = false;
        }
        expect({ name, call: label, allowed: local }).toEqual({ name, call: label, allowed: deployed });
        if (deployed) seen.add(label);
      }
    }
    // Each service is granted somewhere, so each rule was compared both ways; only the legacy
    // context's GenerateDataKey is granted to no function (no value is sealed under it any more).
    expect([...seen].sort()).toEqual([...new Set(calls.map(labelOf))].filter((l) => l !== 'kms:GenerateDataKey (sealed-secret)').sort());
  });

  test('the local runtime refuses exactly the S3 operations the synthesized policies do not allow (local/grants.ts)', () => {
    const bucketArn = (r: unknown, bucketId: string) => JSON.stringify(r) === JSON.stringify({ 'Fn::GetAtt': [bucketId, 'Arn'] });
    /** Whether one policy resource covers `key` of the bucket (null: the bucket itself). */
    const covers = (r: unknown, bucketId: string, key: string | null): boolean => {
      if (r === '*') return true;
      if (key === null) return bucketArn(r, bucketId);
      const join = (r as { 'Fn::Join'?: [string, unknown[]] })['Fn::Join'];
      if (!join || join[1].length !== 2 || !bucketArn(join[1][0], bucketId) || typeof join[1][1] !== 'string') return false;
      return iamGlob((join[1][1] as string).slice(1), key);
    };
    const keys = ['uploads/sub_1/r1/file_1.jpg', 'keyframes/file_1/0.png', 'exports/exp_1.jsonl', 'transcripts/media-1.json', null];
    const actions: BucketAction[] = ['s3:GetObject', 's3:GetObjectTagging', 's3:ListBucket', 's3:PutObject', 's3:PutObjectTagging', 's3:DeleteObject', 's3:AbortMultipartUpload'];
    const functions: [string, EntryAccess, string][] = [
      ...ROUTES.map((r) => [r.id, r.access, routeFunction(r)[0]] as [string, EntryAccess, string]),
      ...QUEUES.map((q) => [q.name, q.access, functionByDescription(`Consumer of the ${q.name} queue`)[0]] as [string, EntryAccess, string]),
      ...SCHEDULES.map((s) => [s.name, s.access, functionByDescription(s.description)[0]] as [string, EntryAccess, string]),
    ];
    const mediaBucket = ofType('AWS::S3::Bucket').find(([, r]) => r.Properties.NotificationConfiguration?.EventBridgeConfiguration)![0];
    let checked = 0;
    for (const [name, access, fnId] of functions) {
      const statements = statementsOf(fnId);
      for (const action of actions) {
        for (const key of keys) {
          if ((action === 's3:ListBucket') !== (key === null)) continue;
          const deployed = statements.some((st) => [st.Action].flat().some((a) => iamGlob(a, action)) && [st.Resource].flat().some((r) => covers(r, mediaBucket, key)));
          expect({ name, action, key, allowed: allows(access.bucket, action, key, { transcribe: access.transcribe }) }).toEqual({ name, action, key, allowed: deployed });
          checked++;
        }
      }
    }
    expect(checked).toBe(functions.length * (6 * 4 + 1));
  });

  test('least privilege: each pipeline consumer reaches only the prefixes its work needs (exports cannot touch uploads, annotation cannot delete, the sandbox cannot read)', () => {
    const mode = (name: string) => QUEUES.find((q) => q.name === name)!.access.bucket;
    const upload = 'uploads/sub_1/r1/file_1.jpg';
    const can = (name: string, action: BucketAction, key: string | null) => allows(mode(name), action, key);
    // exports: writes its multipart file under exports/, nothing else
    expect(can('exports', 's3:PutObject', 'exports/exp_1/x.jsonl')).toBe(true);
    expect([can('exports', 's3:PutObject', upload), can('exports', 's3:DeleteObject', upload), can('exports', 's3:GetObject', upload)]).toEqual([false, false, false]);
    // annotation: reads the upload, writes keyframes, and tags rejected bytes when it takes the verdict
    expect([can('annotation', 's3:GetObject', upload), can('annotation', 's3:PutObject', 'keyframes/file_1/0.png'), can('annotation', 's3:PutObjectTagging', upload)]).toEqual([true, true, true]);
    // both stages may take the verdict, so both may tag the bytes a rejection leaves for the lifecycle rule
    expect([can('scoring', 's3:PutObjectTagging', upload), can('annotation', 's3:PutObjectTagging', upload)]).toEqual([true, true]);
    expect([can('annotation', 's3:DeleteObject', upload), can('annotation', 's3:PutObject', upload)]).toEqual([false, false]);
    // scoring: reads, tags and deletes uploads only; keyframes and exports are out of its reach
    expect([can('scoring', 's3:GetObject', upload), can('scoring', 's3:PutObjectTagging', upload), can('scoring', 's3:DeleteObject', upload)]).toEqual([true, true, true]);
    expect([can('scoring', 's3:DeleteObject', 'exports/exp_1/x.jsonl'), can('scoring', 's3:PutObject', upload)]).toEqual([false, false]);
    // sandbox: uploads as a worker would, and reads nothing
    expect([can('sandbox', 's3:PutObject', upload), can('sandbox', 's3:GetObject', upload), can('sandbox', 's3:DeleteObject', upload)]).toEqual([true, false, false]);
  });

  test('the override may only tag upload objects: the withdrawn objects are deleted by the withdrawals consumer, which may only delete (D71)', () => {
    const override = ROUTES.find((r) => r.id === 'submissions.override')!;
    expect(override.access.bucket).toBe('tag');
    const onObjects = statementsOf(routeFunction(override)[0]).filter((st) => [st.Action].flat().some((a) => a.startsWith('s3:') && a !== 's3:ListBucket'));
    expect(onObjects).toHaveLength(1);
    expect(onObjects[0]!.Action).toBe('s3:PutObjectTagging');
    expect(JSON.stringify(onObjects[0]!.Resource)).toContain('/uploads/*');
    // Listing only so that tagging bytes already deleted answers 404 (409 to the buyer), not 403.
    expect(actionsOf(routeFunction(override)[0]).filter((a) => a.startsWith('s3:')).sort()).toEqual(['s3:ListBucket', 's3:PutObjectTagging']);

    const [consumerId] = functionByDescription('Consumer of the withdrawals queue');
    const s3Actions = actionsOf(consumerId).filter((a) => a.startsWith('s3:'));
    expect(s3Actions.length).toBeGreaterThan(0);
    expect(s3Actions.every((a) => a.startsWith('s3:DeleteObject'))).toBe(true);
  });

  test('Bedrock invocation only where the wiring asks for it, on the configured model only (not every model of the region)', () => {
    for (const q of QUEUES) {
      const [fnId] = functionByDescription(`Consumer of the ${q.name} queue`);
      const bedrock = statementsOf(fnId).filter((s) => [s.Action].flat().some((a) => a.startsWith('bedrock:')));
      if (!q.access.bedrock) {
        expect(bedrock).toEqual([]);
        continue;
      }
      expect(bedrock).toHaveLength(1);
      expect([bedrock[0]!.Action].flat()).toContain('bedrock:InvokeModel');
      expect(JSON.stringify(bedrock[0]!.Resource)).toContain(':foundation-model/amazon.nova-pro-v1:0');
      expect(JSON.stringify(bedrock[0]!.Resource)).not.toContain('foundation-model/*');
    }
    for (const route of ROUTES) {
      expect(actionsOf(routeFunction(route)[0]).some((a) => a.startsWith('bedrock:'))).toBe(false);
    }
  });

  test('functions that send to a queue get sqs:SendMessage and its QUEUE_URL_<NAME>', () => {
    for (const q of QUEUES) {
      const [fnId, fn] = functionByDescription(`Consumer of the ${q.name} queue`);
      for (const target of q.access.sendTo ?? []) {
        const variable = `QUEUE_URL_${target.toUpperCase().replace(/-/g, '_')}`;
        expect(fn.Properties.Environment.Variables[variable]).toEqual({ Ref: queueLogicalId(target) });
        expect(actionsOf(fnId)).toContain('sqs:SendMessage');
      }
    }
  });

  test('routes that enqueue (webhook replay, D37) may send to their queue; other routes may not', () => {
    for (const route of ROUTES) {
      const [fnId, fn] = routeFunction(route);
      const sends = route.access.sendTo ?? [];
      for (const target of sends) {
        const variable = `QUEUE_URL_${target.toUpperCase().replace(/-/g, '_')}`;
        expect(fn.Properties.Environment.Variables[variable]).toEqual({ Ref: queueLogicalId(target) });
      }
      expect([route.id, actionsOf(fnId).includes('sqs:SendMessage')]).toEqual([route.id, sends.length > 0]);
    }
    expect(ROUTES.find((r) => r.id === 'webhook_events.replay')?.access.sendTo).toEqual(['webhooks']);
  });
});

describe('data', () => {
  test('the table follows TABLE_DEF: keys, 3 GSIs, stream, TTL, point-in-time recovery, on demand, retained', () => {
    template.resourceCountIs('AWS::DynamoDB::Table', 1);
    template.hasResource('AWS::DynamoDB::Table', {
      DeletionPolicy: 'Retain',
      Properties: {
        BillingMode: 'PAY_PER_REQUEST',
        KeySchema: [
          { AttributeName: TABLE_DEF.partitionKey, KeyType: 'HASH' },
          { AttributeName: TABLE_DEF.sortKey, KeyType: 'RANGE' },
        ],
        GlobalSecondaryIndexes: TABLE_DEF.gsis.map((g) =>
          Match.objectLike({
            IndexName: g.name,
            KeySchema: [
              { AttributeName: g.partitionKey, KeyType: 'HASH' },
              { AttributeName: g.sortKey, KeyType: 'RANGE' },
            ],
          }),
        ),
        StreamSpecification: { StreamViewType: 'NEW_AND_OLD_IMAGES' },
        TimeToLiveSpecification: { AttributeName: 'ttl', Enabled: true },
        PointInTimeRecoverySpecification: { PointInTimeRecoveryEnabled: true },
      },
    });
    const gsis = ofType('AWS::DynamoDB::Table')[0]![1].Properties.GlobalSecondaryIndexes;
    expect(gsis).toHaveLength(3);
  });

  test('the media bucket blocks public access, is encrypted, enforces TLS and sends events to EventBridge', () => {
    // The media bucket and the bucket of its access logs.
    template.resourceCountIs('AWS::S3::Bucket', 2);
    template.hasResource('AWS::S3::Bucket', {
      DeletionPolicy: 'Retain',
      Properties: {
        PublicAccessBlockConfiguration: {
          BlockPublicAcls: true,
          BlockPublicPolicy: true,
          IgnorePublicAcls: true,
          RestrictPublicBuckets: true,
        },
        BucketEncryption: { ServerSideEncryptionConfiguration: [Match.anyValue()] },
        NotificationConfiguration: { EventBridgeConfiguration: { EventBridgeEnabled: true } },
        CorsConfiguration: { CorsRules: [Match.objectLike({ AllowedMethods: Match.arrayWith(['PUT']) })] },
        LifecycleConfiguration: {
          Rules: Match.arrayWith([Match.objectLike({ AbortIncompleteMultipartUpload: { DaysAfterInitiation: Match.anyValue() } })]),
        },
      },
    });
    template.hasResourceProperties('AWS::S3::BucketPolicy', {
      PolicyDocument: {
        Statement: Match.arrayWith([
          Match.objectLike({ Effect: 'Deny', Condition: { Bool: { 'aws:SecureTransport': 'false' } } }),
        ]),
      },
    });
  });
});

describe('pipeline', () => {
  test('each queue has a dead-letter queue with the wiring maxReceiveCount, and an alarm on that DLQ', () => {
    const alarms = ofType('AWS::CloudWatch::Alarm');
    for (const q of QUEUES) {
      const [, queue] = [queueLogicalId(q.name)].map((id) => [id, resources[id]!] as const)[0]!;
      expect(queue.Properties.VisibilityTimeout).toBe(q.visibilityTimeoutSeconds);
      expect(queue.Properties.DelaySeconds).toBe(q.deliveryDelaySeconds);
      const redrive = queue.Properties.RedrivePolicy;
      expect(redrive.maxReceiveCount).toBe(q.maxReceiveCount);
      const dlqId = redrive.deadLetterTargetArn['Fn::GetAtt'][0] as string;
      expect(resources[dlqId]!.Type).toBe('AWS::SQS::Queue');

      const dlqAlarm = alarms.filter(
        ([, a]) =>
          a.Properties.MetricName === 'ApproximateNumberOfMessagesVisible' &&
          JSON.stringify(a.Properties.Dimensions).includes(`"${dlqId}"`),
      );
      expect(dlqAlarm).toHaveLength(1);
      expect(dlqAlarm[0]![1].Properties).toMatchObject({
        Threshold: q.dlqAlarmThreshold,
        ComparisonOperator: 'GreaterThanOrEqualToThreshold',
      });
      const ageAlarm = alarms.filter(
        ([, a]) =>
          a.Properties.MetricName === 'ApproximateAgeOfOldestMessage' &&
          JSON.stringify(a.Properties.Dimensions).includes(`"${queueLogicalId(q.name)}"`),
      );
      expect(ageAlarm).toHaveLength(1);
    }
  });

  test('every queue enforces TLS', () => {
    for (const [id] of ofType('AWS::SQS::Queue')) {
      const policies = ofType('AWS::SQS::QueuePolicy').filter(([, p]) =>
        JSON.stringify(p.Properties.Queues).includes(`"${id}"`),
      );
      const statements = policies.flatMap(([, p]) => p.Properties.PolicyDocument.Statement);
      expect(statements).toContainEqual(
        expect.objectContaining({ Effect: 'Deny', Condition: { Bool: { 'aws:SecureTransport': 'false' } } }),
      );
    }
  });

  test('consumers read their queue with the wiring batch size, memory and /tmp, and report batch item failures', () => {
    for (const q of QUEUES) {
      const [fnId, fn] = functionByDescription(`Consumer of the ${q.name} queue`);
      expect(fn.Properties.Timeout).toBe(q.consumerTimeoutSeconds);
      expect(fn.Properties.MemorySize).toBe(q.consumerMemoryMb);
      expect([q.name, fn.Properties.EphemeralStorage?.Size ?? 512]).toEqual([q.name, q.ephemeralStorageMb ?? 512]);
      template.hasResourceProperties('AWS::Lambda::EventSourceMapping', {
        FunctionName: { Ref: fnId },
        EventSourceArn: { 'Fn::GetAtt': [queueLogicalId(q.name), 'Arn'] },
        BatchSize: q.batchSize,
        FunctionResponseTypes: ['ReportBatchItemFailures'],
      });
    }
  });

  test('the ObjectCreated rule targets the scoring and annotation queues, for the media bucket only', () => {
    const rule = RULES.find((r) => r.name === 'upload-created')!;
    expect([...rule.targets].sort()).toEqual(['annotation', 'scoring']);
    const bucketId = ofType('AWS::S3::Bucket').find(([id]) => id.startsWith('DataMediaBucket'))![0];
    template.hasResourceProperties('AWS::Events::Rule', {
      EventPattern: {
        source: ['aws.s3'],
        'detail-type': ['Object Created'],
        detail: { object: { key: [{ prefix: 'uploads/' }] }, bucket: { name: [{ Ref: bucketId }] } },
      },
      Targets: Match.arrayWith(
        rule.targets.map((t) =>
          Match.objectLike({ Arn: { 'Fn::GetAtt': [queueLogicalId(t), 'Arn'] }, DeadLetterConfig: Match.anyValue() }),
        ),
      ),
    });
  });

  test('the table stream has one reader (AWS advises at most two per shard): a pipe with the wiring filter, from LATEST, retrying a bounded number of times into a DLQ, onto the stream bus', () => {
    const pipes = ofType('AWS::Pipes::Pipe');
    expect(pipes).toHaveLength(1);
    const props = pipes[0]![1].Properties;
    expect(props.Source).toEqual({ 'Fn::GetAtt': [expect.stringMatching(/^DataTable/), 'StreamArn'] });
    const [busId] = ofType('AWS::Events::EventBus')[0]!;
    expect(ofType('AWS::Events::EventBus')).toHaveLength(1);
    expect(props.Target).toEqual({ 'Fn::GetAtt': [busId, 'Arn'] });
    expect(props.TargetParameters).toEqual({ EventBridgeEventBusParameters: { Source: TABLE_STREAM.source, DetailType: TABLE_STREAM.detailType } });
    expect(props.SourceParameters.FilterCriteria).toEqual({ Filters: [{ Pattern: JSON.stringify(TABLE_STREAM.filter) }] });
    expect(props.SourceParameters.DynamoDBStreamParameters).toMatchObject({
      StartingPosition: 'LATEST',
      MaximumRetryAttempts: expect.any(Number),
      DeadLetterConfig: { Arn: expect.anything() },
    });
    // Nothing else reads the stream (no Lambda event source mapping on it either).
    expect(JSON.stringify(ofType('AWS::Lambda::EventSourceMapping'))).not.toContain('StreamArn');
  });

  test('each stream rule sends the stream record (the event detail) from the stream bus to its queue, with a dead-letter queue', () => {
    const [busId] = ofType('AWS::Events::EventBus')[0]!;
    for (const def of STREAM_RULES) {
      const found = ofType('AWS::Events::Rule').filter(([, r]) => r.Properties.Description === def.description);
      expect(found).toHaveLength(1);
      const props = found[0]![1].Properties;
      expect(props.EventBusName).toEqual({ Ref: busId });
      const p = streamRulePattern(def);
      expect(props.EventPattern).toEqual(p);
      expect(props.Targets).toEqual([
        expect.objectContaining({ Arn: { 'Fn::GetAtt': [queueLogicalId(def.target), 'Arn'] }, InputPath: '$.detail', DeadLetterConfig: { Arn: expect.anything() } }),
      ]);
    }
  });

  test('the pipe role may read the stream and put events on the stream bus, nothing else', () => {
    for (const [, pipe] of ofType('AWS::Pipes::Pipe')) {
      const roleId = pipe.Properties.RoleArn['Fn::GetAtt'][0] as string;
      expect(resources[roleId]!.Properties.AssumeRolePolicyDocument.Statement[0].Principal).toEqual({
        Service: 'pipes.amazonaws.com',
      });
      const actions = ofType('AWS::IAM::Policy')
        .filter(([, p]) => JSON.stringify(p.Properties.Roles) === JSON.stringify([{ Ref: roleId }]))
        .flatMap(([, p]) => p.Properties.PolicyDocument.Statement)
        .flatMap((s: { Action: string | string[] }) => [s.Action].flat());
      expect(actions).toEqual(expect.arrayContaining(['dynamodb:GetRecords', 'events:PutEvents', 'sqs:SendMessage']));
      for (const a of actions) expect(a).toMatch(/^(dynamodb:(ListStreams|DescribeStream|GetRecords|GetShardIterator)|events:PutEvents|sqs:(SendMessage|GetQueueAttributes|GetQueueUrl))$/);
    }
  });

  test('the sandbox delay variable equals the sandbox queue delivery delay (D40)', () => {
    const delay = queueByName('sandbox').deliveryDelaySeconds;
    const [, fn] = functionByDescription('Consumer of the sandbox queue');
    expect(fn.Properties.Environment.Variables.SANDBOX_DELAY_SECONDS).toBe(String(delay));
  });

  test('each schedule runs its function at the wiring rate', () => {
    const minutes = (expr: string): number => {
      const m = /^rate\((\d+) (minute|hour|day)s?\)$/.exec(expr);
      expect(m).not.toBeNull();
      return Number(m![1]) * { minute: 1, hour: 60, day: 1440 }[m![2] as 'minute' | 'hour' | 'day'];
    };
    for (const s of SCHEDULES) {
      const [fnId, fn] = functionByDescription(s.description);
      expect(fn.Properties.Timeout).toBe(s.timeoutSeconds);
      const rules = ofType('AWS::Events::Rule').filter(([, r]) =>
        JSON.stringify(r.Properties.Targets).includes(`"${fnId}"`),
      );
      expect(rules).toHaveLength(1);
      expect(minutes(rules[0]![1].Properties.ScheduleExpression)).toBe(s.everyMinutes);
    }
  });

  test('a failed scheduled run is retried by Lambda as many times as the wiring says (the local scheduler does the same)', () => {
    for (const s of SCHEDULES) {
      const [fnId] = functionByDescription(s.description);
      const configs = ofType('AWS::Lambda::EventInvokeConfig').filter(([, r]) => JSON.stringify(r.Properties.FunctionName).includes(`"${fnId}"`));
      expect(configs).toHaveLength(1);
      expect(configs[0]![1].Properties).toMatchObject({ MaximumRetryAttempts: s.retriesOnFailure, MaximumEventAgeInSeconds: Math.max(60, s.everyMinutes * 60) });
    }
  });

  test('a scheduled run that failed every retry is kept in the schedule\'s dead-letter queue (alarmed), not only counted as an error', () => {
    for (const s of SCHEDULES) {
      const [fnId] = functionByDescription(s.description);
      const [, config] = ofType('AWS::Lambda::EventInvokeConfig').find(([, r]) => JSON.stringify(r.Properties.FunctionName).includes(`"${fnId}"`))!;
      const [, rule] = ofType('AWS::Events::Rule').find(([, r]) => JSON.stringify(r.Properties.Targets).includes(`"${fnId}"`))!;
      const ruleDlq = JSON.stringify(rule.Properties.Targets[0].DeadLetterConfig.Arn);
      expect(JSON.stringify(config.Properties.DestinationConfig.OnFailure.Destination)).toBe(ruleDlq);
    }
  });
});

describe('native pieces (wiring `native`, lib/constructs/native.ts)', () => {
  const ffmpegConsumers = QUEUES.filter((q) => q.native?.ffmpeg);
  const consumerFunction = (name: string, res = resources) => {
    const matches = Object.entries(res).filter(
      ([, r]) => r.Type === 'AWS::Lambda::Function' && r.Properties.Description === `Consumer of the ${name} queue`,
    );
    expect(matches).toHaveLength(1);
    return matches[0]!;
  };

  test('the consumers whose wiring says ffmpeg get the layer of context ffmpegLayerArn', () => {
    expect(ffmpegConsumers.map((q) => q.name).sort()).toEqual(['annotation', 'sandbox', 'scoring']);
    for (const q of ffmpegConsumers) {
      expect(consumerFunction(q.name)[1].Properties.Layers).toEqual([FFMPEG_LAYER_ARN]);
    }
  });

  test('those consumers find ffmpeg and ffprobe in the layer through FFMPEG_PATH and FFPROBE_PATH', () => {
    for (const q of ffmpegConsumers) {
      const env = consumerFunction(q.name)[1].Properties.Environment.Variables;
      expect({ queue: q.name, FFMPEG_PATH: env.FFMPEG_PATH, FFPROBE_PATH: env.FFPROBE_PATH }).toEqual({
        queue: q.name,
        FFMPEG_PATH: '/opt/bin/ffmpeg',
        FFPROBE_PATH: '/opt/bin/ffprobe',
      });
    }
  });

  test('no other function (API routes, schedules, other consumers) gets a layer, but the secrets extension, or ffmpeg paths', () => {
    const withFfmpeg = new Set(ffmpegConsumers.map((q) => consumerFunction(q.name)[0]));
    const others = ofType('AWS::Lambda::Function').filter(([id]) => !withFfmpeg.has(id));
    // The not-found function (unknown routes) is one of the others.
    expect(others).toHaveLength(ROUTES.length + SCHEDULES.length + QUEUES.length - ffmpegConsumers.length + 1);
    for (const [, fn] of others) {
      const env = fn.Properties.Environment.Variables;
      // The Parameters and Secrets extension (lib/constructs/key-access.ts) goes to functions that read a secret.
      const layers = ((fn.Properties.Layers ?? []) as unknown[]).filter((l) => !JSON.stringify(l).includes('Paramsandsecrets'));
      expect([fn.Properties.Description, layers, env.FFMPEG_PATH, env.FFPROBE_PATH]).toEqual([fn.Properties.Description, [], undefined, undefined]);
    }
  });

  test('consumers that ship files get the variable naming where those are in Lambda (/var/task/...)', () => {
    const shipping = QUEUES.filter((q) => (q.native?.files ?? []).length > 0);
    expect(shipping.map((q) => q.name).sort()).toEqual(['sandbox', 'scoring']);
    for (const q of shipping) {
      const env = consumerFunction(q.name)[1].Properties.Environment.Variables;
      for (const f of q.native!.files!) expect([q.name, f.env, env[f.env]]).toEqual([q.name, f.env, `/var/task/${f.to}`]);
    }
  });

  test('without ffmpegLayerArn the synth fails, naming the consumers and both ways out', () => {
    expect(() => synthStack({ ffmpegLayerArn: undefined })).toThrow(
      /^The scoring consumer, the annotation consumer and the sandbox consumer run ffprobe\/ffmpeg.*-c ffmpegLayerArn=.*-c allowMissingFfmpeg=true/,
    );
  });

  test('with allowMissingFfmpeg=true it synthesizes without layers and warns on each consumer that needs ffmpeg', () => {
    // The synth prints its validation report (the warnings) on stderr, as `cdk synth` would.
    const report = jest.spyOn(console, 'error').mockImplementation(() => undefined);
    try {
      const stack = synthStack({ ffmpegLayerArn: undefined, allowMissingFfmpeg: 'true' });
      const res = Template.fromStack(stack).toJSON().Resources as Record<string, Resource>;
      for (const [, fn] of Object.entries(res).filter(([, r]) => r.Type === 'AWS::Lambda::Function')) {
        expect(fn.Properties.Layers).toBeUndefined();
        expect(fn.Properties.Environment.Variables.FFPROBE_PATH).toBeUndefined();
      }
      const warnings = Annotations.fromStack(stack).findWarning('*', Match.stringLikeRegexp('gets no ffmpeg layer'));
      expect(warnings.map((w) => w.id).sort()).toEqual(
        ffmpegConsumers.map((q) => `/TestStack/PipelineFunctions/${routeLogicalName({ id: q.name })}Consumer`).sort(),
      );
      expect(report.mock.calls.flat().join('\n')).toMatch(/ScoringConsumer runs ffprobe\/ffmpeg but gets no ffmpeg layer/);
    } finally {
      report.mockRestore();
    }
  });

  test('ffmpegLayerArn must be a layer version ARN', () => {
    expect(() => synthStack({ ffmpegLayerArn: 'arn:aws:lambda:eu-west-1:123456789012:layer:ffmpeg' })).toThrow(
      /must be a layer version ARN/,
    );
  });

  test('outside us-east-1 a bare Amazon Nova model id warns at synth: it needs an inference profile there', () => {
    const report = jest.spyOn(console, 'error').mockImplementation(() => undefined);
    try {
      const eu = synthStack({}, { env: { region: 'eu-west-1' } });
      const w = Annotations.fromStack(eu).findWarning('*', Match.stringLikeRegexp('inference profile such as eu\\.amazon\\.nova-pro-v1:0'));
      expect(w).toHaveLength(1);
      const profiled = synthStack({ bedrockModelId: 'eu.amazon.nova-pro-v1:0' }, { env: { region: 'eu-west-1' } });
      expect(Annotations.fromStack(profiled).findWarning('*', Match.stringLikeRegexp('inference profile'))).toHaveLength(0);
    } finally {
      report.mockRestore();
    }
  });

  test('a stack without a region at synth refuses, at deploy, a bare Amazon Nova model id outside us-east-1 (a CloudFormation rule); an inference profile needs no rule', () => {
    const rules = (st: MarketplaceStack) =>
      Object.entries((Template.fromStack(st).toJSON().Rules ?? {}) as Record<string, { Assertions: { Assert: unknown }[] }>).filter(([id]) => id.startsWith('BedrockModelRegion')).map(([, r]) => r);
    const agnostic = rules(synthStack({}));
    expect(agnostic).toHaveLength(1);
    expect(agnostic[0]!.Assertions[0]!.Assert).toEqual({ 'Fn::Equals': [{ Ref: 'AWS::Region' }, 'us-east-1'] });
    expect(rules(synthStack({ bedrockModelId: 'eu.amazon.nova-pro-v1:0' }))).toHaveLength(0);
  });

  test('API Gateway execution logs go to a group the stack creates with a retention, before the stage', () => {
    const stack = synthStack({});
    const res = Template.fromStack(stack).toJSON().Resources as Record<string, Resource>;
    const [id, group] = Object.entries(res).find(([, r]) => r.Type === 'AWS::Logs::LogGroup' && JSON.stringify(r.Properties.LogGroupName ?? '').includes('API-Gateway-Execution-Logs_'))!;
    expect(group.Properties.RetentionInDays).toBe(30);
    const stage = Object.values(res).find((r) => r.Type === 'AWS::ApiGateway::Stage')!;
    expect([stage.DependsOn].flat()).toContain(id);
  });

  test('a layer in another region than the stack is refused (layers are regional)', () => {
    expect(() => synthStack({}, { env: { region: 'us-east-1' } })).toThrow(/is in eu-west-1 but the stack deploys to us-east-1/);
  });
});

describe('outputs', () => {
  test('API URL, table, bucket and every queue URL are stack outputs', () => {
    const outputs = Object.keys(template.toJSON().Outputs as object);
    expect(outputs).toEqual(expect.arrayContaining(['ApiUrl', 'TableName', 'BucketName']));
    for (const q of QUEUES) {
      // `<PascalCase name>QueueUrl`: top-ups → TopUpsQueueUrl
      expect([q.name, outputs.some((o) => o.toLowerCase() === `${q.name.replace(/-/g, '')}queueurl`)]).toEqual([q.name, true]);
    }
  });
});
