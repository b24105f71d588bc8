import { route } from '../../shared/http/route';
import { presentEndpoint } from '../../shared/webhooks/endpoints';

// The resource middleware already answered 404 for another tenant's or a malformed id (D3, D43).
export const handler = route('webhook_endpoints.get', {}, async (req) => ({
  body: presentEndpoint(req.resource),
}));
