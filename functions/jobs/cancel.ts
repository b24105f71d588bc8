import { route } from '../../shared/http/route';
import { cancelJob } from '../../shared/jobs';
import type { JobItem } from '../../shared/jobs/model';

// Spec cancel rules 1-6: 404 and a missing Idempotency-Key are answered by the middlewares;
// cancelJob refunds exactly once and emits one job.cancelled.
export const handler = route('jobs.cancel', {}, async (req) => ({
  body: await cancelJob(req.ctx, req.buyer, req.resource as JobItem),
}));
