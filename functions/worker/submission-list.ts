import * as z from 'zod';
import { route } from '../../shared/http/route';
import { listQuery } from '../../shared/http/schemas';
import { listWorkerSubmissions } from '../../shared/work/queries';

const query = listQuery({
  status: z.enum(['awaiting_upload', 'pending_score', 'approved', 'rejected', 'retry_pending', 'withdrawn', 'expired']).optional(),
  job_id: z.string().max(40).optional(),
});

/** The worker's submission history, newest first. */
export const handler = route('worker.submissions.list', { query }, async (req) => ({
  body: await listWorkerSubmissions(req.worker, req.query),
}));
