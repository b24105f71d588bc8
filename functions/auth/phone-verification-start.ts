import { route } from '../../shared/http/route';
import { startVerification } from '../../shared/orgs/phone';
import { startBody } from '../../shared/orgs/phone-body';

export const handler = route('auth.phone_verification.start', { body: startBody }, async (req) => ({
  status: 202,
  body: await startVerification(req.ctx, req.buyer, req.body.phone),
}));
