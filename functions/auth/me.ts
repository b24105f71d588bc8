import { routeWithoutIdempotencyKey } from '../../shared/http/route-without-key';
import { me } from '../../shared/orgs';

export const handler = routeWithoutIdempotencyKey('me.get', {}, async (req) => ({ body: me(req.buyer) }));
