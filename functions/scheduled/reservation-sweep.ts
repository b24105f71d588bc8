import type { ScheduledEvent } from 'aws-lambda';
import { sweepExpiredReservations } from '../../shared/work/release-reservation';
import { logger, withInvocationScope } from '../../shared/logger';

/** D23: the schedule `reservation-sweep` frees expired reservations and retry windows without any request. */
export const handler = withInvocationScope(async (event: ScheduledEvent) => {
  const released = await sweepExpiredReservations();
  logger.info('reservation sweep', { released, event_time: event?.time });
  return { released };
});
