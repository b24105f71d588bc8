import * as z from 'zod';
import { route } from '../../shared/http/route';
import { SUBSCRIBABLE, updateEndpoint } from '../../shared/webhooks/endpoints';

// D36: PATCH accepts url, description, events, status.
const body = z.strictObject({
  url: z.string().trim().min(1).max(2048).optional(),
  description: z.string().max(500).nullable().optional(),
  events: z.array(z.enum(SUBSCRIBABLE)).min(1).max(SUBSCRIBABLE.length).optional(),
  status: z.enum(['enabled', 'disabled']).optional(),
});

export const handler = route('webhook_endpoints.update', { body }, async (req) => ({
  body: await updateEndpoint(req.ctx, req.buyer, req.resource, req.body),
}));
