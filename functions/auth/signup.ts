import * as z from 'zod';
import { route } from '../../shared/http/route';
import { signup } from '../../shared/orgs';

const body = z.strictObject({
  name: z.string().trim().min(1).max(200),
  email: z.email().max(254),
});

export const handler = route('auth.signup', { body }, async (req) => ({
  status: 201,
  body: await signup(req.ctx, req.body),
}));
