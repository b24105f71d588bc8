import { routeWithoutIdempotencyKey } from '../../shared/http/route-without-key';
import { listQuery } from '../../shared/http/schemas';
import { listAvailableJobs } from '../../shared/work/queries';

/** D23, D45: jobs with free slots in the worker's environment, best paid first. */
export const handler = routeWithoutIdempotencyKey('worker.jobs.available', { query: listQuery({}) }, async (req) => ({
  body: await listAvailableJobs(req.worker, req.query),
}));
