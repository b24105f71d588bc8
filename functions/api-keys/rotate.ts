import { route } from '../../shared/http/route';
import { responseSealer } from '../../shared/secrets/sealer';
import { rotateKey } from '../../shared/api-keys';

export const handler = route('api_keys.rotate', {}, async (req) => ({
  body: await rotateKey(req.ctx, req.buyer.orgId, req.resource),
}), { sealer: responseSealer }); // the response holds a one-time secret: stored sealed (issue 11.1)
