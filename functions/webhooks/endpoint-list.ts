import { routeWithoutIdempotencyKey } from '../../shared/http/route-without-key';
import { listQuery } from '../../shared/http/schemas';
import { listEndpoints } from '../../shared/webhooks/endpoints';

export const handler = routeWithoutIdempotencyKey('webhook_endpoints.list', { query: listQuery({}) }, async (req) => ({
  body: await listEndpoints(req.buyer, req.query.limit, req.query.cursor),
}));
