import * as z from 'zod';
import { route } from '../../shared/http/route';
import { listQuery, isoTimestamp } from '../../shared/http/schemas';
import { listEvents } from '../../shared/webhooks/events';
import { EVENT_TYPES } from '../../shared/outbox';

// D38 filters.
const query = listQuery({
  type: z.enum(EVENT_TYPES).optional(),
  delivery_status: z.enum(['pending', 'delivered', 'failed']).optional(),
  created_after: isoTimestamp.optional(),
});

export const handler = route('webhook_events.list', { query }, async (req) => ({
  body: await listEvents(req.buyer, req.query),
}));
