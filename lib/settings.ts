import { Annotations, Aws, CfnRule, Fn, Stack, Token } from 'aws-cdk-lib';
import type { Construct } from 'constructs';
import { DEFAULT_BEDROCK_MODEL_ID } from '../shared/scoring/bedrock';
import { deployedConsumerCap, QUOTA_BOUND_DEFAULT_CONCURRENCY, type QueueDef } from '../shared/manifest/wiring';
import { WAIT_SLOTS_MAX } from '../shared/manifest/access';
import { WAF_RATE_DEFAULTS } from '../shared/http/edge';

/**
 * Deployment settings read from context (`-c key=value`, docs/deploying.md), with their defaults.
 * Limits are sized to the account's quotas, which differ per account: the defaults fit a fresh
 * account's Bedrock and Transcribe quotas, and a platform team with raised quotas raises them here.
 */
export interface Limits {
  /** Held long polls at once per long-poll route, all organizations (shared/long-poll-slots.ts). */
  longPollMaxWaits: number;
  /** Held long polls at once per long-poll route and organization. */
  longPollMaxWaitsPerOrg: number;
  /** Event-source maximum concurrency of a queue's consumer, or undefined (Lambda decides). */
  consumerMaxConcurrency(q: QueueDef): number | undefined;
  /** Requests per 5 minutes per source IP, all routes (WAF rate-based rule). */
  wafRatePer5Min: number;
  /** Requests per 5 minutes per source IP on the signup routes. */
  wafSignupRatePer5Min: number;
}

export interface ModelSettings {
  /** Bedrock model of the scoring stage (BEDROCK_MODEL_ID). */
  bedrockModelId: string;
  /** Bedrock model of the annotation stage (ANNOTATION_MODEL_ID). */
  annotationModelId: string;
}

export { QUOTA_BOUND_DEFAULT_CONCURRENCY };

/** `transcription` → `transcriptionMaxConcurrency`, `upload-created` → `uploadCreatedMaxConcurrency`. */
export function maxConcurrencyContextKey(queueName: string): string {
  const camel = queueName.replace(/-([a-z])/g, (_, c: string) => c.toUpperCase());
  return `${camel}MaxConcurrency`;
}

export function numberContext(scope: Construct, key: string): number | undefined {
  const v: unknown = scope.node.tryGetContext(key);
  if (v === undefined || v === null || v === '') return undefined;
  const n = Number(v);
  if (!Number.isFinite(n)) throw new Error(`context ${key} must be a number, got ${String(v)}`);
  return n;
}

function integerIn(key: string, n: number, min: number, max: number): number {
  if (!Number.isInteger(n) || n < min || n > max) throw new Error(`context ${key} must be an integer ${min}..${max}, got ${n}`);
  return n;
}

export function limitsFromContext(scope: Construct): Limits {
  if (numberContext(scope, 'longPollReservedConcurrency') !== undefined) {
    throw new Error('context longPollReservedConcurrency is gone: long-poll routes have no reserved concurrency now; held waits are capped by longPollMaxWaits (per route) and longPollMaxWaitsPerOrg (docs/deploying.md)');
  }
  const maxWaits = integerIn('longPollMaxWaits', numberContext(scope, 'longPollMaxWaits') ?? 20, 1, WAIT_SLOTS_MAX);
  const perOrg = integerIn('longPollMaxWaitsPerOrg', numberContext(scope, 'longPollMaxWaitsPerOrg') ?? 5, 1, maxWaits);
  return {
    longPollMaxWaits: maxWaits,
    longPollMaxWaitsPerOrg: perOrg,
    consumerMaxConcurrency(q: QueueDef): number | undefined {
      const key = maxConcurrencyContextKey(q.name);
      const given = numberContext(scope, key);
      // SQS event sources take 2..1000.
      if (given !== undefined) return integerIn(key, given, 2, 1000);
      return deployedConsumerCap(q);
    },
    // WAF rate-based rules take 10..2,000,000,000 per evaluation window.
    wafRatePer5Min: integerIn('wafRatePer5Min', numberContext(scope, 'wafRatePer5Min') ?? WAF_RATE_DEFAULTS.perIpPer5Min, 10, 2_000_000_000),
    wafSignupRatePer5Min: integerIn('wafSignupRatePer5Min', numberContext(scope, 'wafSignupRatePer5Min') ?? WAF_RATE_DEFAULTS.signupPerIpPer5Min, 10, 2_000_000_000),
  };
}

export function modelsFromContext(scope: Construct): ModelSettings {
  const bedrockModelId = (scope.node.tryGetContext('bedrockModelId') as string | undefined) || DEFAULT_BEDROCK_MODEL_ID;
  const annotationModelId = (scope.node.tryGetContext('annotationModelId') as string | undefined) || bedrockModelId;
  for (const id of [bedrockModelId, annotationModelId]) {
    if (!/^[a-z0-9.:-]+$/i.test(id)) throw new Error(`Bedrock model ids are like amazon.nova-pro-v1:0, got ${id}`);
  }
  // Amazon Nova's on-demand throughput is offered in us-east-1; elsewhere its model ids are called
  // through a cross-region inference profile (e.g. eu.amazon.nova-pro-v1:0). Say so at synth time.
  const region = Stack.of(scope).region;
  const bare = [...new Set([bedrockModelId, annotationModelId].filter((id) => id.startsWith('amazon.nova-')))];
  if (!Token.isUnresolved(region) && region !== 'us-east-1' && bare.length) {
    Annotations.of(scope).addWarningV2(
      'media:bedrock-model-region',
      `${bare.join(', ')} is called on demand in us-east-1; in ${region} set -c bedrockModelId (and annotationModelId) to an inference profile such as ${geoPrefix(region)}.${bare[0]}, or every Bedrock call will fail and end in the dead-letter queues.`,
    );
  }
  // An environment-agnostic stack (no region at synth, as bin/app.ts builds it) learns its region
  // only at deploy: there a CloudFormation rule refuses the deploy outside us-east-1, before any
  // resource is created, rather than letting every scoring message fail into the dead-letter queue.
  if (Token.isUnresolved(region) && bare.length && !Stack.of(scope).node.tryFindChild('BedrockModelRegion')) {
    new CfnRule(Stack.of(scope), 'BedrockModelRegion', {
      assertions: [
        {
          assert: Fn.conditionEquals(Aws.REGION, 'us-east-1'),
          assertDescription: `${bare.join(', ')} is called on demand only in us-east-1: outside it, deploy with -c bedrockModelId (and annotationModelId) set to a cross-region inference profile of the region's geography (eu., apac. or us. before the model id).`,
        },
      ],
    });
  }
  return { bedrockModelId, annotationModelId };
}

/** The geography prefix of the region's Bedrock cross-region inference profiles. */
function geoPrefix(region: string): string {
  if (region.startsWith('eu-')) return 'eu';
  if (region.startsWith('ap-')) return 'apac';
  return 'us';
}
