import { routeWithoutIdempotencyKey } from '../../shared/http/route-without-key';
import { getCredits } from '../../shared/billing';

export const handler = routeWithoutIdempotencyKey('billing.credits', {}, async (req) => ({ body: await getCredits(req.buyer, req.tenant) }));
