import * as z from '../../shared/zod';
import { route } from '../../shared/http/route';
import { rateJob } from '../../shared/jobs';
import type { JobItem } from '../../shared/jobs/model';

const body = z.strictObject({
  rating: z.int().check(z.gte(1), z.lte(5)),
  feedback: z.optional(z.string().check(z.maxLength(2000))),
});

// D22: 409 unless completed and not yet rated.
export const handler = route('jobs.rate', { body }, async (req) => ({
  body: await rateJob(req.ctx, req.buyer, req.resource as JobItem, req.body),
}));
