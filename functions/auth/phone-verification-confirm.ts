import { route } from '../../shared/http/route';
import { confirmVerification } from '../../shared/orgs/phone';
import { confirmBody } from '../../shared/orgs/phone-body';

export const handler = route('auth.phone_verification.confirm', { body: confirmBody }, async (req) => ({
  body: await confirmVerification(req.ctx, req.buyer, req.body.phone, req.body.code),
}));
