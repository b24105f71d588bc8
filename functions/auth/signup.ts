import * as z from '../../shared/zod';
import { route } from '../../shared/http/route';
import { responseSealer } from '../../shared/secrets/sealer';
import { signup } from '../../shared/orgs';

const body = z.strictObject({
  name: z.string().check(z.trim(), z.minLength(1), z.maxLength(200)),
  email: z.email().check(z.maxLength(254)),
});

export const handler = route('auth.signup', { body }, async (req) => ({
  status: 201,
  body: await signup(req.ctx, req.body),
}), { sealer: responseSealer }); // the response holds a one-time secret: stored sealed (issue 11.1)
