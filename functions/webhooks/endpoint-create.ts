import * as z from 'zod';
import { route } from '../../shared/http/route';
import { createEndpoint, SUBSCRIBABLE } from '../../shared/webhooks/endpoints';

// D36: url (https, public addresses), description, events (kinds, or "*" for all).
const body = z.strictObject({
  url: z.string().trim().min(1).max(2048),
  description: z.string().max(500).nullable().optional(),
  events: z.array(z.enum(SUBSCRIBABLE)).min(1).max(SUBSCRIBABLE.length),
});

// D43: 201; the signing secret appears in this response only (and in rotate_secret's).
export const handler = route('webhook_endpoints.create', { body }, async (req) => ({
  status: 201,
  body: await createEndpoint(req.ctx, req.buyer, req.body),
}));
