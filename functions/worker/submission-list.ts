import * as z from '../../shared/zod';
import { routeWithoutIdempotencyKey } from '../../shared/http/route-without-key';
import { listQuery } from '../../shared/http/schemas';
import { listWorkerSubmissions } from '../../shared/work/queries';

const query = listQuery({
  status: z.optional(z.enum(['awaiting_upload', 'pending_score', 'approved', 'rejected', 'retry_pending', 'withdrawn', 'expired', 'cancelled'])),
  job_id: z.optional(z.string().check(z.minLength(1), z.maxLength(40))), // an empty value is refused, not read as "no filter"
});

/** The worker's submission history, newest first. */
export const handler = routeWithoutIdempotencyKey('worker.submissions.list', { query }, async (req) => ({
  body: await listWorkerSubmissions(req.worker, req.query),
}));
