import * as z from '../../shared/zod';
import { routeWithoutIdempotencyKey } from '../../shared/http/route-without-key';
import { isoTimestamp } from '../../shared/http/schemas';
import { submissionSummary } from '../../shared/work/queries';

const query = z.strictObject({
  job_id: z.optional(z.string().check(z.minLength(1), z.maxLength(40))), // an empty value is refused, not read as "no filter"
  start_date: z.optional(isoTimestamp),
  end_date: z.optional(isoTimestamp),
});

/** D50, D56. */
export const handler = routeWithoutIdempotencyKey('submissions.summary', { query }, async (req) => ({
  body: await submissionSummary(req.buyer, req.query),
}));
