import type { RouteDef } from '../shared/manifest/routes';
import type { QueueDef, ScheduleDef } from '../shared/manifest/wiring';

/**
 * The nested stacks the functions are split into (CloudFormation allows 500 resources per
 * template; each route costs about 9). The manifest stays the one source: a function's domain
 * follows from its handler's folder, so a new entry lands in a stack without any edit here.
 *   webhooks: functions/webhooks/**   billing: functions/billing/**
 *   pipeline: every queue consumer and schedule not in the two above
 *   api:      every other route
 */
export const DOMAINS = ['api', 'pipeline', 'webhooks', 'billing'] as const;
export type Domain = (typeof DOMAINS)[number];

function byFolder(handler: string): Domain | undefined {
  const folder = handler.split('/')[1];
  if (folder === 'webhooks') return 'webhooks';
  if (folder === 'billing') return 'billing';
  return undefined;
}

export const routeDomain = (r: RouteDef): Domain => byFolder(r.handler) ?? 'api';
export const queueDomain = (q: QueueDef): Domain => byFolder(q.consumer) ?? 'pipeline';
export const scheduleDomain = (s: ScheduleDef): Domain => byFolder(s.handler) ?? 'pipeline';
