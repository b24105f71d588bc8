import * as z from 'zod';
import { route } from '../../shared/http/route';
import { rateJob } from '../../shared/jobs';
import type { JobItem } from '../../shared/jobs/model';

const body = z.strictObject({
  rating: z.number().int().min(1).max(5),
  feedback: z.string().max(2000).optional(),
});

// D22: 409 unless completed and not yet rated.
export const handler = route('jobs.rate', { body }, async (req) => ({
  body: await rateJob(req.ctx, req.buyer, req.resource as JobItem, req.body),
}));
