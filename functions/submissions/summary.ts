import * as z from 'zod';
import { route } from '../../shared/http/route';
import { isoTimestamp } from '../../shared/http/schemas';
import { submissionSummary } from '../../shared/work/queries';

const query = z.strictObject({
  job_id: z.string().max(40).optional(),
  start_date: isoTimestamp.optional(),
  end_date: isoTimestamp.optional(),
});

/** D50, D56. */
export const handler = route('submissions.summary', { query }, async (req) => ({
  body: await submissionSummary(req.buyer, req.query),
}));
