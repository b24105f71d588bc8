import * as z from '../../shared/zod';
import { routeWithoutIdempotencyKey } from '../../shared/http/route-without-key';
import { SUBSCRIBABLE, updateEndpoint } from '../../shared/webhooks/endpoints';

// D36: PATCH accepts url, description, events, status.
const body = z.strictObject({
  url: z.optional(z.string().check(z.trim(), z.minLength(1), z.maxLength(2048))),
  description: z.optional(z.nullable(z.string().check(z.maxLength(500)))),
  events: z.optional(z.array(z.enum(SUBSCRIBABLE)).check(z.minLength(1), z.maxLength(SUBSCRIBABLE.length))),
  status: z.optional(z.enum(['enabled', 'disabled'])),
});

export const handler = routeWithoutIdempotencyKey('webhook_endpoints.update', { body }, async (req) => ({
  body: await updateEndpoint(req.ctx, req.buyer, req.resource, req.body),
}));
