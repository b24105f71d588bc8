import * as z from '../../shared/zod';
import { route } from '../../shared/http/route';
import { confirmVerification } from '../../shared/orgs/phone';
import { e164 } from './phone-verification-start';

const body = z.strictObject({ phone: e164, code: z.string().check(z.regex(/^\d{6}$/, 'a 6-digit code')) });

export const handler = route('auth.phone_verification.confirm', { body }, async (req) => ({
  body: await confirmVerification(req.ctx, req.buyer, req.body.phone, req.body.code),
}));
