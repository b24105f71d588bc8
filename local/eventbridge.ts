/**
 * The default event bus, locally: S3 "Object Created" events go through the same rule patterns as
 * in the stack (RULES), restricted to our bucket, and each matching rule sends the event JSON to its
 * target queues, as an EventBridge rule with an SQS target does.
 */
import { matchesPattern, RULES, type EventPattern, type RuleDef } from '../shared/manifest/wiring';
import type { Log } from './log';

export type SendToQueue = (queueName: string, body: string) => Promise<void>;

export interface EventRouter {
  /** Delivers one event; resolves when every target queue has it. Returns the queues it went to. */
  route(event: unknown): Promise<string[]>;
}

/** The rule's pattern as deployed: bucket rules only see events of the service's bucket. */
export function deployedPattern(rule: RuleDef, bucketName: string): EventPattern {
  if (rule.source !== 'bucket') return rule.pattern;
  const detail = (rule.pattern.detail ?? {}) as EventPattern;
  return { ...rule.pattern, detail: { ...detail, bucket: { name: [bucketName] } } };
}

export function createEventRouter(opts: { bucketName: string; send: SendToQueue; log: Log; rules?: readonly RuleDef[] }): EventRouter {
  const rules = (opts.rules ?? RULES).map((rule) => ({ rule, pattern: deployedPattern(rule, opts.bucketName) }));
  return {
    async route(event) {
      const body = JSON.stringify(event);
      const targets = rules.filter((r) => matchesPattern(r.pattern, event)).flatMap((r) => r.rule.targets);
      await Promise.all(targets.map((queue) => opts.send(queue, body)));
      if (targets.length) opts.log.debug(`eventbridge: event → ${targets.join(', ')}`);
      return targets;
    },
  };
}
