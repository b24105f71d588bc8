import type { ScheduledEvent } from 'aws-lambda';
import { sweepCreditLots } from '../../shared/ledger/expiry';
import { logger, withInvocationScope } from '../../shared/logger';

/** D33: the schedule `credit-expiry-sweep` of shared/manifest/wiring.ts. */
export const handler = withInvocationScope(async (event: ScheduledEvent) => {
  const result = await sweepCreditLots();
  logger.info('credit expiry sweep', { ...result, event_time: event.time });
  return result;
});
