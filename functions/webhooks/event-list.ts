import * as z from '../../shared/zod';
import { routeWithoutIdempotencyKey } from '../../shared/http/route-without-key';
import { listQuery, isoTimestamp } from '../../shared/http/schemas';
import { listEvents } from '../../shared/webhooks/events';
import { EVENT_TYPES } from '../../shared/outbox';

// D38 filters.
const query = listQuery({
  type: z.optional(z.enum(EVENT_TYPES)),
  delivery_status: z.optional(z.enum(['pending', 'delivered', 'failed'])),
  created_after: z.optional(isoTimestamp),
});

export const handler = routeWithoutIdempotencyKey('webhook_events.list', { query }, async (req) => ({
  body: await listEvents(req.buyer, req.query),
}));
