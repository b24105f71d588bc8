import * as z from '../../shared/zod';
import { route } from '../../shared/http/route';
import { responseSealer } from '../../shared/secrets/sealer';
import { createKey } from '../../shared/api-keys';
import { SCOPES } from '../../shared/manifest/routes';

const body = z.strictObject({
  name: z.string().check(z.trim(), z.minLength(1), z.maxLength(100)),
  scopes: z.optional(z.array(z.enum(SCOPES)).check(z.minLength(1), z.maxLength(SCOPES.length))),
  environment: z.optional(z.enum(['live', 'test'])),
});

// D43: 200, and the new key takes the calling key's environment unless `environment` is given.
export const handler = route('api_keys.create', { body }, async (req) => ({
  body: await createKey(req.ctx, req.buyer.orgId, {
    name: req.body.name,
    scopes: req.body.scopes,
    environment: req.body.environment ?? req.buyer.env,
  }),
}), { sealer: responseSealer }); // the response holds a one-time secret: stored sealed (issue 11.1)
