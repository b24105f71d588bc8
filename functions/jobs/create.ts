import { route } from '../../shared/http/route';
import { createJob } from '../../shared/jobs';
import { createJobBody } from '../../shared/jobs/create-body';

// D14-D19, D31, D57: bounds (400), combinations (422), price floor (400 pricing_violation),
// free tier (403) before credits (402); the escrow commits with the job and its response (D11).
export const handler = route('jobs.create', { body: createJobBody }, async (req) => ({
  status: 201,
  body: await createJob(req.ctx, req.buyer, req.body, req.tenant),
}));
