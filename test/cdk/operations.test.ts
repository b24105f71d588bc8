/**
 * What a platform team operates (issue 13): alarms that reach someone, limits, edges, lifecycle,
 * and templates with headroom. Synthesized once; every rule is checked against the manifest.
 */
import { Match, Template } from 'aws-cdk-lib/assertions';
import { ROUTES, routeLogicalName, type RouteDef } from '../../shared/manifest/routes';
import { QUEUES, RULES, SCHEDULES, STREAM_RULES, TABLE_STREAM } from '../../shared/manifest/wiring';
import { TABLE_DEF } from '../../shared/db/table';
import { METRIC, METRICS_NAMESPACE } from '../../shared/observability/metrics';
import { maxConcurrencyContextKey, QUOTA_BOUND_DEFAULT_CONCURRENCY } from '../../lib/settings';
import { flatten, synthesize, type Resource } from './support';
import { integerAbove } from '../../lib/edges/waf';
import { MAX_BODY_BYTES } from '../../shared/http/body-limits';
import { WAF_RATE_DEFAULTS, WAF_RATE_LIMITED, WAF_RATE_WINDOW_SECONDS } from '../../shared/http/edge';
import { EXPORT_RETENTION_DAYS } from '../../shared/exports/model';
import { REJECTED_RETENTION_DAYS, TRANSCRIPT_RETENTION_DAYS } from '../../shared/storage/lifecycle';
import { DLQ_RETENTION } from '../../lib/plumbing';

const synthesized = synthesize({ transcriptionMaxConcurrency: 7, annotationMaxConcurrency: 3, longPollMaxWaits: 30, longPollMaxWaitsPerOrg: 6 });
const resources = flatten(synthesized);
const template = Template.fromJSON({ Resources: resources }, { skipCyclicalDependenciesCheck: true });
const ofType = (type: string): [string, Resource][] => Object.entries(resources).filter(([, r]) => r.Type === type);
const alarms = ofType('AWS::CloudWatch::Alarm').map(([, a]) => a);
const topicId = ofType('AWS::SNS::Topic')[0]![0];

const fnOf = (description: (d: string) => boolean): [string, Resource] => {
  const found = ofType('AWS::Lambda::Function').filter(([, r]) => description(String(r.Properties.Description)));
  expect(found).toHaveLength(1);
  return found[0]!;
};
const routeFn = (r: RouteDef) => fnOf((d) => d.endsWith(`(${r.id})`));
const alarmsOn = (dimensionValue: unknown) =>
  alarms.filter((a) => JSON.stringify(a.Properties.Dimensions ?? a.Properties.Metrics ?? []).includes(JSON.stringify(dimensionValue)));

describe('every dead-letter queue can be found and watched', () => {
  const outputs = Object.keys((synthesized.templates.get(synthesized.stack.node.path)!.template.toJSON().Outputs ?? {}) as Record<string, unknown>);
  test('the stack outputs the URL of every dead-letter queue the redrive runbook names: queues, rules, the pipe and the schedules', () => {
    const expected = [
      ...QUEUES.map((q) => `${routeLogicalName({ id: q.name })}DlqUrl`),
      ...[...RULES, ...STREAM_RULES].map((r) => `${routeLogicalName({ id: r.name })}RuleDlqUrl`),
      `${routeLogicalName({ id: TABLE_STREAM.name })}PipeDlqUrl`,
      ...SCHEDULES.map((s) => `${routeLogicalName({ id: s.name })}ScheduleDlqUrl`),
    ];
    expect(expected.filter((o) => !outputs.includes(o))).toEqual([]);
  });

  test('the dashboard plots every dead-letter queue, the schedules’ included', () => {
    const [, dash] = ofType('AWS::CloudWatch::Dashboard')[0]!;
    const body = JSON.stringify(dash.Properties.DashboardBody);
    for (const s of SCHEDULES) expect(body).toContain(`${s.name} schedule`);
    for (const r of [...RULES, ...STREAM_RULES]) expect(body).toContain(`${r.name} rule`);
  });
});

describe('alarms reach someone', () => {
  test('one SNS topic, e-mail subscription from context alarmEmail, and every alarm notifies it', () => {
    expect(ofType('AWS::SNS::Topic')).toHaveLength(1);
    template.hasResourceProperties('AWS::SNS::Subscription', { Protocol: 'email', Endpoint: 'oncall@example.com', TopicArn: { Ref: topicId } });
    expect(alarms.length).toBeGreaterThan(0);
    for (const a of alarms) expect(a.Properties.AlarmActions).toEqual([{ Ref: topicId }]);
  });

  test('the topic accepts only TLS (a deny on aws:SecureTransport=false)', () => {
    template.hasResourceProperties('AWS::SNS::TopicPolicy', {
      PolicyDocument: { Statement: Match.arrayWith([Match.objectLike({ Effect: 'Deny', Condition: { Bool: { 'aws:SecureTransport': 'false' } } })]) },
    });
  });

  test('every function alarms on errors and on throttles', () => {
    for (const [id] of ofType('AWS::Lambda::Function')) {
      const on = alarmsOn({ Name: 'FunctionName', Value: { Ref: id } });
      expect([id, on.map((a) => a.Properties.MetricName).sort()]).toEqual([id, ['Errors', 'Throttles']]);
    }
  });

  test('every route alarms on its p99 latency, the long poll above its budget', () => {
    const latency = alarms.filter((a) => a.Properties.MetricName === 'Latency');
    for (const r of ROUTES) {
      const mine = latency.filter((a) => a.Properties.Dimensions.some((d: any) => d.Name === 'Resource' && d.Value === r.path) && a.Properties.Dimensions.some((d: any) => d.Name === 'Method' && d.Value === r.method));
      expect([r.id, mine.length]).toEqual([r.id, 1]);
      expect(mine[0]!.Properties.ExtendedStatistic).toBe('p99');
      if (r.longPoll) expect(mine[0]!.Properties.Threshold).toBeGreaterThan(25_000);
      else expect(mine[0]!.Properties.Threshold).toBeLessThanOrEqual(10_000);
    }
  });

  test('the API alarms on 5XX answers and the table on throttled reads or writes of it and every index', () => {
    expect(alarms.filter((a) => a.Properties.MetricName === '5XXError')).toHaveLength(1);
    const throttle = alarms.find((a) => JSON.stringify(a.Properties.Metrics ?? []).includes('WriteThrottleEvents'))!;
    for (const g of TABLE_DEF.gsis) expect(JSON.stringify(throttle.Properties.Metrics)).toContain(g.name);
    expect(JSON.stringify(throttle.Properties.Metrics)).toContain('ReadThrottleEvents');
  });

  test('the table throttle alarm fills every missing throttle metric with 0 (DynamoDB publishes them only when non-zero), so one throttled index alone fires it', () => {
    const throttle = alarms.find((a) => JSON.stringify(a.Properties.Metrics ?? []).includes('WriteThrottleEvents'))!;
    const metrics = throttle.Properties.Metrics as { Id: string; Expression?: string; MetricStat?: unknown }[];
    const terms = metrics.filter((m) => m.MetricStat).map((m) => m.Id);
    const sum = metrics.find((m) => m.Expression)!.Expression!;
    expect(sum.split(' + ').sort()).toEqual(terms.map((t) => `FILL(${t}, 0)`).sort());
  });

  test('every dead-letter queue (queues, rules, stream rules, the pipe, schedules) has a depth alarm, and every queue an age alarm', () => {
    const dlqs = ofType('AWS::SQS::Queue').filter(([id]) => /Dlq/.test(id));
    expect(dlqs).toHaveLength(QUEUES.length + RULES.length + STREAM_RULES.length + 1 + SCHEDULES.length);
    for (const [id] of dlqs) {
      const on = alarmsOn({ Name: 'QueueName', Value: { 'Fn::GetAtt': [id, 'QueueName'] } });
      expect([id, on.map((a) => a.Properties.MetricName)]).toEqual([id, ['ApproximateNumberOfMessagesVisible']]);
    }
    const age = alarms.filter((a) => a.Properties.MetricName === 'ApproximateAgeOfOldestMessage');
    expect(age).toHaveLength(QUEUES.length);
  });

  test('the dashboard shows uploads, verdicts, queue depths, webhook success and ledger movements from the EMF metrics', () => {
    const [, dash] = ofType('AWS::CloudWatch::Dashboard')[0]!;
    const body = JSON.stringify(dash.Properties.DashboardBody);
    for (const fragment of ['MatchedEvents', 'submission.approved', 'submission.rejected', 'ApproximateNumberOfMessagesVisible', METRIC.webhookAttempts, METRIC.ledgerMovements, METRIC.ledgerCents, METRICS_NAMESPACE]) {
      expect([fragment, body.includes(fragment)]).toEqual([fragment, true]);
    }
  });
});

describe('limits', () => {
  test('no route has reserved concurrency (a long-poll route\'s would cap its plain GETs too); long-poll routes get the held-wait caps from context', () => {
    for (const r of ROUTES) {
      const [, fn] = routeFn(r);
      expect([r.id, fn.Properties.ReservedConcurrentExecutions]).toEqual([r.id, undefined]);
      const env = fn.Properties.Environment.Variables;
      expect([r.id, env.LONG_POLL_MAX_WAITS, env.LONG_POLL_MAX_WAITS_PER_ORG]).toEqual(r.longPoll ? [r.id, '30', '6'] : [r.id, undefined, undefined]);
    }
  });

  test('a worker priority window other than 0 is refused, not accepted and ignored (D45)', () => {
    expect(() => synthesize({}, { workerPriorityWindowSeconds: 30 })).toThrow(/workerPriorityWindowSeconds must be 0/);
  });

  test('the retired context longPollReservedConcurrency is refused with what replaced it', () => {
    expect(() => synthesize({ longPollReservedConcurrency: 20 })).toThrow(/longPollMaxWaits/);
  });

  test('quota-bound consumers (Bedrock, Transcribe) have a maximum concurrency, from context when given', () => {
    for (const q of QUEUES) {
      const [fnId] = fnOf((d) => d === `Consumer of the ${q.name} queue`);
      const [, esm] = ofType('AWS::Lambda::EventSourceMapping').find(([, m]) => JSON.stringify(m.Properties.FunctionName) === JSON.stringify({ Ref: fnId }))!;
      const given = { [maxConcurrencyContextKey('transcription')]: 7, [maxConcurrencyContextKey('annotation')]: 3 }[maxConcurrencyContextKey(q.name)];
      const expected = given ?? q.maxConcurrency ?? (q.access.bedrock || q.access.transcribe ? QUOTA_BOUND_DEFAULT_CONCURRENCY : undefined);
      expect([q.name, esm.Properties.ScalingConfig?.MaximumConcurrency]).toEqual([q.name, expected]);
      if (q.access.bedrock || q.access.transcribe) expect(esm.Properties.ScalingConfig.MaximumConcurrency).toBeDefined();
    }
  });

  test('every queue hides a received message for at least 6 × its consumer timeout', () => {
    for (const q of QUEUES) {
      const [, fn] = fnOf((d) => d === `Consumer of the ${q.name} queue`);
      const [, esm] = ofType('AWS::Lambda::EventSourceMapping').find(([, m]) => JSON.stringify(m.Properties.FunctionName).includes(fnOf((d) => d === `Consumer of the ${q.name} queue`)[0]))!;
      const queueId = (esm.Properties.EventSourceArn['Fn::GetAtt'] as string[])[0]!;
      expect(resources[queueId]!.Properties.VisibilityTimeout).toBeGreaterThanOrEqual(6 * fn.Properties.Timeout);
    }
  });

  test('every schedule and rule target has a dead-letter queue', () => {
    for (const [, rule] of ofType('AWS::Events::Rule')) {
      for (const t of rule.Properties.Targets) expect([rule.Properties.Description, t.DeadLetterConfig?.Arn]).toEqual([rule.Properties.Description, expect.anything()]);
    }
  });
});

describe('edges', () => {
  test('a regional WAF web ACL on the API stage: AWS common rules, a per-IP rate rule, and a tighter one on the signup routes', () => {
    const [aclId, acl] = ofType('AWS::WAFv2::WebACL')[0]!;
    expect(acl.Properties.Scope).toBe('REGIONAL');
    const rules = acl.Properties.Rules as any[];
    expect(rules.map((r) => r.Statement.ManagedRuleGroupStatement?.Name).filter(Boolean)).toEqual(['AWSManagedRulesCommonRuleSet']);
    const rate = rules.filter((r) => r.Statement.RateBasedStatement);
    const signup = rate.find((r) => r.Statement.RateBasedStatement.ScopeDownStatement)!;
    const general = rate.find((r) => !r.Statement.RateBasedStatement.ScopeDownStatement)!;
    expect(signup.Statement.RateBasedStatement.Limit).toBeLessThan(general.Statement.RateBasedStatement.Limit);
    for (const r of ROUTES.filter((x) => x.principal === 'none' && x.rateLimit.startsWith('signup'))) {
      expect(JSON.stringify(signup.Statement.RateBasedStatement.ScopeDownStatement)).toContain(r.path);
    }
    const [, assoc] = ofType('AWS::WAFv2::WebACLAssociation')[0]!;
    expect(assoc.Properties.WebACLArn).toEqual({ 'Fn::GetAtt': [aclId, 'Arn'] });
    const stageId = ofType('AWS::ApiGateway::Stage')[0]![0];
    expect(JSON.stringify(assoc.Properties.ResourceArn)).toContain(`"/stages/",{"Ref":"${stageId}"}`);
  });

  test('the rate rules have the limits and the block answer the local front applies (local/waf-rate.ts)', () => {
    const [, acl] = ofType('AWS::WAFv2::WebACL')[0]!;
    const rate = (acl.Properties.Rules as any[]).filter((r) => r.Statement.RateBasedStatement);
    const bodies = acl.Properties.CustomResponseBodies as Record<string, { Content: string }>;
    const signup = rate.find((r) => r.Statement.RateBasedStatement.ScopeDownStatement)!;
    const general = rate.find((r) => !r.Statement.RateBasedStatement.ScopeDownStatement)!;
    expect(signup.Statement.RateBasedStatement.Limit).toBe(WAF_RATE_DEFAULTS.signupPerIpPer5Min);
    expect(general.Statement.RateBasedStatement.Limit).toBe(WAF_RATE_DEFAULTS.perIpPer5Min);
    expect(signup.Priority).toBeLessThan(general.Priority);
    // D44: buyers' and workers' signups are counted apart, per address and path.
    expect(signup.Statement.RateBasedStatement).toMatchObject({ AggregateKeyType: 'CUSTOM_KEYS', CustomKeys: [{ IP: {} }, { UriPath: { TextTransformations: [{ Priority: 0, Type: 'NONE' }] } }] });
    expect(general.Statement.RateBasedStatement.AggregateKeyType).toBe('IP');
    for (const r of rate) {
      expect(r.Statement.RateBasedStatement).toMatchObject({ EvaluationWindowSec: WAF_RATE_WINDOW_SECONDS });
      const block = r.Action.Block.CustomResponse;
      expect(block.ResponseCode).toBe(WAF_RATE_LIMITED.status);
      expect(block.ResponseHeaders).toEqual([{ Name: 'Retry-After', Value: WAF_RATE_LIMITED.headers['Retry-After'] }]);
      expect(bodies[block.CustomResponseBodyKey]!.Content).toBe(WAF_RATE_LIMITED.body);
    }
  });

  test('D61: a declared body over 4 MiB is refused first with the local front\'s 413 (a multipart upload\'s points to the pre-signed upload), before Lambda\'s 6 MB could answer a 5xx', () => {
    const [, acl] = ofType('AWS::WAFv2::WebACL')[0]!;
    const rules = (acl.Properties.Rules as any[]).sort((a, b) => a.Priority - b.Priority);
    const [multipart, any] = rules;
    const bodies = acl.Properties.CustomResponseBodies as Record<string, { Content: string }>;
    const refusal = (r: any) => {
      expect(r.Action.Block.CustomResponse.ResponseCode).toBe(413);
      return JSON.parse(bodies[r.Action.Block.CustomResponse.CustomResponseBodyKey]!.Content).error;
    };
    const lengthTest = (s: any) => s.RegexMatchStatement;
    expect(multipart.Statement.AndStatement.Statements.map(lengthTest).filter(Boolean)).toEqual([expect.objectContaining({ FieldToMatch: { SingleHeader: { Name: 'content-length' } }, RegexString: integerAbove(MAX_BODY_BYTES) })]);
    expect(JSON.stringify(multipart.Statement)).toContain('multipart/form-data');
    expect(refusal(multipart)).toMatchObject({ type: 'invalid_request', details: [expect.objectContaining({ code: 'use_presigned_upload' })] });
    expect(lengthTest(any.Statement)).toMatchObject({ FieldToMatch: { SingleHeader: { Name: 'content-length' } }, RegexString: integerAbove(MAX_BODY_BYTES) });
    expect(refusal(any)).toMatchObject({ type: 'invalid_request', details: [expect.objectContaining({ code: 'body_too_large' })] });
  });

  test('the common rules only count on what the API accepts: the JSON body rules (an 8 KB+ job or Stripe event, text quoting <script>) and the User-Agent rule', () => {
    const [, acl] = ofType('AWS::WAFv2::WebACL')[0]!;
    const common = (acl.Properties.Rules as any[]).find((r) => r.Statement.ManagedRuleGroupStatement?.Name === 'AWSManagedRulesCommonRuleSet')!;
    const overrides = common.Statement.ManagedRuleGroupStatement.RuleActionOverrides as { Name: string; ActionToUse: Record<string, unknown> }[];
    expect(overrides.map((o) => o.Name).sort()).toEqual(['CrossSiteScripting_BODY', 'EC2MetaDataSSRF_BODY', 'GenericLFI_BODY', 'GenericRFI_BODY', 'NoUserAgent_HEADER', 'SizeRestrictions_BODY']);
    for (const o of overrides) expect(o.ActionToUse).toEqual({ Count: {} });
  });

  test('execution logs at ERROR without request bodies, access logs on', () => {
    template.hasResourceProperties('AWS::ApiGateway::Stage', {
      MethodSettings: Match.arrayWith([Match.objectLike({ LoggingLevel: 'ERROR', DataTraceEnabled: false })]),
      AccessLogSetting: Match.objectLike({ DestinationArn: Match.anyValue() }),
    });
  });

  test('the media bucket writes S3 server access logs to a separate, TLS-only, encrypted bucket', () => {
    const [mediaId, media] = ofType('AWS::S3::Bucket').find(([id]) => id.startsWith('DataMediaBucket'))!;
    const logBucketId = media.Properties.LoggingConfiguration.DestinationBucketName.Ref as string;
    expect(logBucketId).not.toBe(mediaId);
    expect(resources[logBucketId]!.Properties.BucketEncryption).toBeDefined();
  });
});

describe('lifecycle', () => {
  const [, media] = ofType('AWS::S3::Bucket').find(([id]) => id.startsWith('DataMediaBucket'))!;
  const rules = media.Properties.LifecycleConfiguration.Rules as any[];

  test('D71: rejected uploads (tagged by the pipeline) outlive the 7-day override window even when the verdict came from a message dead-lettered and redriven late', () => {
    const r = rules.find((x) => x.TagFilters)!;
    expect(r.TagFilters).toEqual([{ Key: 'verdict', Value: 'rejected' }]);
    // S3 counts from the upload; the verdict may come after a dead-letter queue's 14 days and a
    // source queue's 4 more, then the window runs 7 days.
    expect(r.ExpirationInDays).toBe(REJECTED_RETENTION_DAYS);
    expect(r.ExpirationInDays).toBeGreaterThanOrEqual(DLQ_RETENTION.toDays() + 4 + 7);
  });

  test('exports are deleted after their retention (the bound of every export link) and incomplete multipart uploads after 1 day; nothing else expires', () => {
    expect(rules.find((x) => x.Prefix === 'exports/')!.ExpirationInDays).toBe(EXPORT_RETENTION_DAYS);
    expect(rules.find((x) => x.AbortIncompleteMultipartUpload)!.AbortIncompleteMultipartUpload.DaysAfterInitiation).toBe(1);
    // Transcribe's output is read once, when its job completes.
    expect(rules.find((x) => x.Prefix === 'transcripts/')!.ExpirationInDays).toBe(TRANSCRIPT_RETENTION_DAYS);
    // Approved files (uploads/ without the rejected tag) and keyframes have no expiry.
    expect(rules.filter((x) => x.ExpirationInDays !== undefined && !x.TagFilters && !['exports/', 'transcripts/'].includes(x.Prefix))).toEqual([]);
  });
});

describe('structure with headroom', () => {
  test('no template holds more than 450 resources, and each domain stack has room for ten more routes', () => {
    const counts = [...synthesized.templates].map(([name, t]) => [name, Object.keys(t.resources).length] as const);
    const perRoute = Math.ceil(
      Object.keys(synthesized.templates.get('TestStack/ApiFunctions')!.resources).length / ROUTES.filter((r) => !/^functions\/(webhooks|billing)\//.test(r.handler)).length,
    );
    for (const [name, n] of counts) {
      expect([name, n <= 450]).toEqual([name, true]);
      if (name !== 'TestStack') expect([name, n + 10 * perRoute <= 450]).toEqual([name, true]);
    }
    expect(counts.map(([n]) => n).sort()).toEqual(['TestStack', 'TestStack/ApiFunctions', 'TestStack/BillingFunctions', 'TestStack/PipelineFunctions', 'TestStack/WebhooksFunctions']);
  });
});
