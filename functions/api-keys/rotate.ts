import { route } from '../../shared/http/route';
import { rotateKey } from '../../shared/api-keys';

export const handler = route('api_keys.rotate', {}, async (req) => ({
  body: await rotateKey(req.ctx, req.buyer.orgId, req.resource),
}));
