import { route } from '../../shared/http/route';
import { me } from '../../shared/orgs';

export const handler = route('me.get', {}, async (req) => ({ body: me(req.buyer) }));
