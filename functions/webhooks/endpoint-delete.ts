import { routeWithoutIdempotencyKey } from '../../shared/http/route-without-key';
import { deleteEndpoint } from '../../shared/webhooks/endpoints';

// D43: 204. Pending retries to a deleted endpoint end as `failed` (endpoint_deleted).
export const handler = routeWithoutIdempotencyKey('webhook_endpoints.delete', {}, async (req) => {
  await deleteEndpoint(req.ctx, req.buyer, req.resource);
  return { status: 204 };
});
