import * as z from 'zod';
import { route } from '../../shared/http/route';
import { isoTimestamp, listQuery } from '../../shared/http/schemas';
import { listJobs } from '../../shared/jobs';
import { JOB_STATUSES } from '../../shared/jobs/model';

// D21: `status` also accepts `filled`; D12 cursors bound to the tenant and every filter.
const query = listQuery({
  status: z.enum(JOB_STATUSES).optional(),
  type: z.enum(['data_collection', 'feedback']).optional(),
  created_after: isoTimestamp.optional(),
});

export const handler = route('jobs.list', { query }, async (req) => ({
  body: await listJobs(req.buyer, req.query),
}));
