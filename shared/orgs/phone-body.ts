/**
 * The request bodies of phone verification (D7): start and confirm share the number's format. Kept
 * apart from the handlers so that the confirm route does not bundle the start route (and with it
 * the SMS client).
 */
import * as z from '../zod';

/** E.164: a plus sign and 8 to 15 digits. */
const e164 = z.string().check(z.regex(/^\+[1-9]\d{7,14}$/, 'an E.164 phone number such as +14155550100'));

export const startBody = z.strictObject({ phone: e164 });
export const confirmBody = z.strictObject({ phone: e164, code: z.string().check(z.regex(/^\d{6}$/, 'a 6-digit code')) });
