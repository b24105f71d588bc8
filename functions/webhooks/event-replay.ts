import * as z from '../../shared/zod';
import { route } from '../../shared/http/route';
import { replayEvent } from '../../shared/webhooks/replay';

// D37/D43: 202 with the event; the same event id is delivered again, freshly signed (D48).
const body = z.strictObject({
  endpoint_id: z.optional(z.string().check(z.minLength(1), z.maxLength(64))),
});

export const handler = route('webhook_events.replay', { body }, async (req) => ({
  status: 202,
  body: await replayEvent(req.ctx, req.buyer, req.resource, req.body.endpoint_id),
}));
