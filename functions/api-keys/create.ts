import * as z from 'zod';
import { route } from '../../shared/http/route';
import { createKey } from '../../shared/api-keys';
import { SCOPES } from '../../shared/manifest/routes';

const body = z.strictObject({
  name: z.string().trim().min(1).max(100),
  scopes: z.array(z.enum(SCOPES)).min(1).max(SCOPES.length).optional(),
  environment: z.enum(['live', 'test']).optional(),
});

// D43: 200, and the new key takes the calling key's environment unless `environment` is given.
export const handler = route('api_keys.create', { body }, async (req) => ({
  body: await createKey(req.ctx, req.buyer.orgId, {
    name: req.body.name,
    scopes: req.body.scopes,
    environment: req.body.environment ?? req.buyer.env,
  }),
}));
