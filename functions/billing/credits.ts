import { route } from '../../shared/http/route';
import { getCredits } from '../../shared/billing';

export const handler = route('billing.credits', {}, async (req) => ({ body: await getCredits(req.buyer, req.tenant) }));
