import * as z from '../../shared/zod';
import { routeWithoutIdempotencyKey } from '../../shared/http/route-without-key';
import { isoTimestamp, listQuery } from '../../shared/http/schemas';
import { listJobs } from '../../shared/jobs';
import { JOB_STATUSES } from '../../shared/jobs/model';

// D21: `status` also accepts `filled`; D12 cursors bound to the tenant and every filter.
const query = listQuery({
  status: z.optional(z.enum(JOB_STATUSES)),
  type: z.optional(z.enum(['data_collection', 'feedback'])),
  created_after: z.optional(isoTimestamp),
});

export const handler = routeWithoutIdempotencyKey('jobs.list', { query }, async (req) => ({
  body: await listJobs(req.buyer, req.query),
}));
