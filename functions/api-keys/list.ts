import { routeWithoutIdempotencyKey } from '../../shared/http/route-without-key';
import { listQuery } from '../../shared/http/schemas';
import { listKeys } from '../../shared/api-keys';

export const handler = routeWithoutIdempotencyKey('api_keys.list', { query: listQuery({}) }, async (req) => ({
  body: await listKeys(req.buyer.orgId, req.query.limit, req.query.cursor),
}));
