import * as z from '../../shared/zod';
import { route } from '../../shared/http/route';
import { responseSealer } from '../../shared/secrets/sealer';
import { createEndpoint, SUBSCRIBABLE } from '../../shared/webhooks/endpoints';

// D36: url (https, public addresses), description, events (kinds, or "*" for all).
const body = z.strictObject({
  url: z.string().check(z.trim(), z.minLength(1), z.maxLength(2048)),
  description: z.optional(z.nullable(z.string().check(z.maxLength(500)))),
  events: z.array(z.enum(SUBSCRIBABLE)).check(z.minLength(1), z.maxLength(SUBSCRIBABLE.length)),
});

// D43: 201; the signing secret appears in this response only (and in rotate_secret's).
export const handler = route('webhook_endpoints.create', { body }, async (req) => ({
  status: 201,
  body: await createEndpoint(req.ctx, req.buyer, req.body),
}), { sealer: responseSealer }); // the response holds a one-time secret: stored sealed (issue 11.1)
