import * as z from 'zod';
import { route } from '../../shared/http/route';
import { isoTimestamp, listQuery } from '../../shared/http/schemas';
import { listTenantSubmissions } from '../../shared/work/queries';
import { BUYER_STATUSES } from '../../shared/work/model';

const query = listQuery({
  job_id: z.string().max(40).optional(),
  status: z.enum(BUYER_STATUSES).optional(),
  min_score: z.coerce.number().int().min(1).max(5).optional(),
  start_date: isoTimestamp.optional(),
  end_date: isoTimestamp.optional(),
});

/** D8 scope jobs:read; date range defaults to the last 30 days. */
export const handler = route('submissions.list', { query }, async (req) => ({
  body: await listTenantSubmissions(req.buyer, req.query),
}));
