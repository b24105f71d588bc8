import * as z from '../../shared/zod';
import { route } from '../../shared/http/route';
import { responseSealer } from '../../shared/secrets/sealer';
import { rotateEndpointSecret } from '../../shared/webhooks/endpoints';

// D36/D37: 200 with the new secret; the previous one keeps signing for 24 h.
export const handler = route('webhook_endpoints.rotate_secret', { body: z.strictObject({}) }, async (req) => ({
  body: await rotateEndpointSecret(req.ctx, req.buyer, req.resource),
}), { sealer: responseSealer }); // the response holds a one-time secret: stored sealed (issue 11.1)
