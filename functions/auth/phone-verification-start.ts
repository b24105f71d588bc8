import * as z from '../../shared/zod';
import { route } from '../../shared/http/route';
import { startVerification } from '../../shared/orgs/phone';

/** E.164: a plus sign and 8 to 15 digits. */
export const e164 = z.string().check(z.regex(/^\+[1-9]\d{7,14}$/, 'an E.164 phone number such as +14155550100'));

const body = z.strictObject({ phone: e164 });

export const handler = route('auth.phone_verification.start', { body }, async (req) => ({
  status: 202,
  body: await startVerification(req.ctx, req.buyer, req.body.phone),
}));
