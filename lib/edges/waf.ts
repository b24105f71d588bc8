import { Stack, aws_apigateway as apigw, aws_wafv2 as wafv2 } from 'aws-cdk-lib';
import type { Construct } from 'constructs';
import { bodyTooLarge, MAX_BODY_BYTES } from '../../shared/http/body-limits';
import { multipartTooLarge } from '../../shared/work/upload-limits';
import { COMMON_RULES_EXEMPT_PATH_ENDS, SIGNUP_PATHS, WAF_RATE_LIMITED, WAF_RATE_WINDOW_SECONDS, wafBody } from '../../shared/http/edge';
import type { Limits } from '../settings';

/**
 * A regular expression (WAF's PCRE subset) matching exactly the decimal integers above `n`,
 * leading zeros allowed: how the web ACL reads a Content-Length as a number.
 */
export function integerAbove(n: number): string {
  if (!Number.isSafeInteger(n) || n < 0) throw new Error(`integerAbove: ${n} is not a non-negative integer`);
  const d = String(n);
  const alternatives = [`[1-9][0-9]{${d.length},}`]; // more digits
  for (let i = 0; i < d.length; i++) {
    const digit = Number(d[i]);
    if (digit === 9) continue;
    const rest = d.length - i - 1;
    alternatives.push(`${d.slice(0, i)}[${digit + 1}-9]${rest > 0 ? `[0-9]{${rest}}` : ''}`);
  }
  return `^\\s*0*(?:${alternatives.join('|')})\\s*$`; // optional whitespace around the value, as HTTP allows
}

/** A refusal as the API's error envelope; WAF's bodies are fixed, so it has no request id (the local front answers the same body, shared/http/edge.ts). */
const envelopeOf = wafBody;

/** Paths WAF sees on a REST API include the stage: `/api/v1/...`; we match on the manifest path's end. */
const endsWith = (path: string): wafv2.CfnWebACL.StatementProperty => ({
  byteMatchStatement: {
    fieldToMatch: { uriPath: {} },
    positionalConstraint: 'ENDS_WITH',
    searchString: path,
    textTransformations: [{ priority: 0, type: 'NONE' }],
  },
});
const anyOf = (statements: wafv2.CfnWebACL.StatementProperty[]): wafv2.CfnWebACL.StatementProperty =>
  statements.length === 1 ? statements[0]! : { orStatement: { statements } };

const RATE_LIMITED_BODY = 'rate_limited';
const MULTIPART_TOO_LARGE_BODY = 'multipart_too_large';
const BODY_TOO_LARGE_BODY = 'body_too_large';

/** Rules of AWSManagedRulesCommonRuleSet set to count (see apiWaf): the body rules and the User-Agent rule. */
export const BODY_AND_AGENT_RULES_COUNTED = [
  'SizeRestrictions_BODY',
  'CrossSiteScripting_BODY',
  'GenericLFI_BODY',
  'GenericRFI_BODY',
  'EC2MetaDataSSRF_BODY',
  'NoUserAgent_HEADER',
] as const;

/**
 * A regional web ACL on the API stage:
 * 1. signup routes (manifest `rateLimit: signup_*`, unauthenticated): a tight rate per IP and path;
 * 2. every route: a per-IP flood ceiling (the per-key limits of D13 stay in the handlers);
 * 3. AWS managed common rules (OWASP-style), except on binary upload bodies, where body
 *    signatures fire on random bytes and the 8 KB body-size rule would refuse every upload.
 *    On the other routes the rules that read the JSON body, and the one that wants a User-Agent,
 *    only count (BODY_AND_AGENT_RULES_COUNTED): they would refuse requests the API accepts and the
 *    local runtime serves (a 9 KB job, a Stripe event over 8 KB, a description quoting `<script>`
 *    or `../`, a webhook URL with an IP address, a server client that sends no User-Agent). Every
 *    body is validated by its route's schema instead; the header, query and path rules block
 *    (the WAF_FILTERED gateway response, lib/api.ts). Their size rules (a query string over
 *    2,048 bytes, a URI path over 1,024) are enforced by the local front too (shared/http/edge.ts).
 * Rate-based blocks answer 429 in the API's error envelope. Before all of them, a declared body
 * (Content-Length) over 4 MiB is refused with the same 413 as the local HTTP front: a multipart
 * upload's points to the pre-signed upload (D61). Without these rules such a body would reach
 * Lambda over its 6 MB (binary bodies arrive base64-encoded) and API Gateway would answer a 5xx.
 */
export function apiWaf(scope: Construct, id: string, o: { stage: apigw.Stage; limits: Limits }): wafv2.CfnWebACL {
  const signupPaths = SIGNUP_PATHS;
  // The upload routes' path ends, where the core rules do not apply (shared with the local front's size rules).
  const uploadPaths = COMMON_RULES_EXEMPT_PATH_ENDS;
  const visibility = (name: string): wafv2.CfnWebACL.VisibilityConfigProperty => ({
    cloudWatchMetricsEnabled: true,
    metricName: name,
    sampledRequestsEnabled: true,
  });
  const block429: wafv2.CfnWebACL.RuleActionProperty = {
    block: { customResponse: { responseCode: WAF_RATE_LIMITED.status, customResponseBodyKey: RATE_LIMITED_BODY, responseHeaders: [{ name: 'Retry-After', value: WAF_RATE_LIMITED.headers['Retry-After']! }] } },
  };
  const rules: wafv2.CfnWebACL.RuleProperty[] = [];
  const declaredOver: wafv2.CfnWebACL.StatementProperty = {
    regexMatchStatement: {
      fieldToMatch: { singleHeader: { Name: 'content-length' } },
      regexString: integerAbove(MAX_BODY_BYTES),
      textTransformations: [{ priority: 0, type: 'NONE' }],
    },
  };
  const multipart: wafv2.CfnWebACL.StatementProperty = {
    byteMatchStatement: {
      fieldToMatch: { singleHeader: { Name: 'content-type' } },
      positionalConstraint: 'CONTAINS',
      searchString: 'multipart/form-data',
      textTransformations: [{ priority: 0, type: 'LOWERCASE' }],
    },
  };
  const block413 = (body: string): wafv2.CfnWebACL.RuleActionProperty => ({ block: { customResponse: { responseCode: 413, customResponseBodyKey: body } } });
  rules.push({
    name: 'MultipartBodyOver4MiB',
    priority: 0,
    action: block413(MULTIPART_TOO_LARGE_BODY),
    statement: { andStatement: { statements: [multipart, declaredOver] } },
    visibilityConfig: visibility('MultipartBodyOver4MiB'),
  });
  rules.push({
    name: 'BodyOver4MiB',
    priority: 1,
    action: block413(BODY_TOO_LARGE_BODY),
    statement: declaredOver,
    visibilityConfig: visibility('BodyOver4MiB'),
  });
  if (signupPaths.length > 0) {
    rules.push({
      name: 'SignupRatePerIp',
      priority: 2,
      action: block429,
      statement: {
        rateBasedStatement: {
          // Per address and path: buyers' and workers' signups are counted apart (D44).
          aggregateKeyType: 'CUSTOM_KEYS',
          customKeys: [{ ip: {} }, { uriPath: { textTransformations: [{ priority: 0, type: 'NONE' }] } }],
          limit: o.limits.wafSignupRatePer5Min,
          evaluationWindowSec: WAF_RATE_WINDOW_SECONDS,
          scopeDownStatement: anyOf(signupPaths.map(endsWith)),
        },
      },
      visibilityConfig: visibility('SignupRatePerIp'),
    });
  }
  rules.push({
    name: 'RatePerIp',
    priority: 3,
    action: block429,
    statement: { rateBasedStatement: { aggregateKeyType: 'IP', limit: o.limits.wafRatePer5Min, evaluationWindowSec: WAF_RATE_WINDOW_SECONDS } },
    visibilityConfig: visibility('RatePerIp'),
  });
  const common: wafv2.CfnWebACL.StatementProperty = {
    managedRuleGroupStatement: {
      vendorName: 'AWS',
      name: 'AWSManagedRulesCommonRuleSet',
      ruleActionOverrides: BODY_AND_AGENT_RULES_COUNTED.map((name) => ({ name, actionToUse: { count: {} } })),
      scopeDownStatement: uploadPaths.length > 0 ? { notStatement: { statement: anyOf(uploadPaths.map(endsWith)) } } : undefined,
    },
  };
  rules.push({
    name: 'AwsCommonRules',
    priority: 4,
    overrideAction: { none: {} },
    statement: common,
    visibilityConfig: visibility('AwsCommonRules'),
  });

  const acl = new wafv2.CfnWebACL(scope, id, {
    scope: 'REGIONAL',
    defaultAction: { allow: {} },
    description: 'API - bodies over 4 MiB, per-IP rate limits, tighter on signups, and the AWS managed common rules',
    rules,
    customResponseBodies: {
      [RATE_LIMITED_BODY]: {
        contentType: 'APPLICATION_JSON',
        content: WAF_RATE_LIMITED.body,
      },
      [MULTIPART_TOO_LARGE_BODY]: { contentType: 'APPLICATION_JSON', content: envelopeOf(multipartTooLarge()) },
      [BODY_TOO_LARGE_BODY]: { contentType: 'APPLICATION_JSON', content: envelopeOf(bodyTooLarge()) },
    },
    visibilityConfig: visibility('ApiWebAcl'),
  });
  const stack = Stack.of(scope);
  const association = new wafv2.CfnWebACLAssociation(scope, `${id}Association`, {
    resourceArn: `arn:${stack.partition}:apigateway:${stack.region}::/restapis/${o.stage.restApi.restApiId}/stages/${o.stage.stageName}`,
    webAclArn: acl.attrArn,
  });
  association.node.addDependency(o.stage);
  return acl;
}
