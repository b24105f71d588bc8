import { route } from '../../shared/http/route';
import { revokeKey } from '../../shared/api-keys';

export const handler = route('api_keys.revoke', {}, async (req) => {
  await revokeKey(req.ctx, req.buyer.orgId, req.resource);
  return { status: 204 };
});
