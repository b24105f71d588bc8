import * as z from 'zod';
import { route } from '../../shared/http/route';
import { signupWorker } from '../../shared/workers';

const body = z.strictObject({
  name: z.string().trim().min(1).max(200),
  email: z.email().max(254),
});

export const handler = route('worker.signup', { body }, async (req) => ({
  status: 201,
  body: await signupWorker(req.ctx, req.body),
}));
