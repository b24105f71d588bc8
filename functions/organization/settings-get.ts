import { routeWithoutIdempotencyKey } from '../../shared/http/route-without-key';
import { getSettings } from '../../shared/orgs';

export const handler = routeWithoutIdempotencyKey('organization.settings.get', {}, async (req) => ({ body: await getSettings(req.buyer.orgId) }));
