import { routeWithoutIdempotencyKey } from '../../shared/http/route-without-key';
import { presentEndpoint } from '../../shared/webhooks/endpoints';

// The resource middleware already answered 404 for another tenant's or a malformed id (D3, D43).
export const handler = routeWithoutIdempotencyKey('webhook_endpoints.get', {}, async (req) => ({
  body: presentEndpoint(req.resource),
}));
