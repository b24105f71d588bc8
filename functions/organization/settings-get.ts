import { route } from '../../shared/http/route';
import { getSettings } from '../../shared/orgs';

export const handler = route('organization.settings.get', {}, async (req) => ({ body: await getSettings(req.buyer.orgId) }));
