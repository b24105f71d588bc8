import * as z from '../../shared/zod';
import { routeWithoutIdempotencyKey } from '../../shared/http/route-without-key';
import { isoTimestamp, listQuery } from '../../shared/http/schemas';
import { listTenantSubmissions } from '../../shared/work/queries';
import { BUYER_STATUSES } from '../../shared/work/model';

const query = listQuery({
  job_id: z.optional(z.string().check(z.minLength(1), z.maxLength(40))), // an empty value is refused, not read as "no filter"
  status: z.optional(z.enum(BUYER_STATUSES)),
  min_score: z.optional(z.coerce.number().check(z.int(), z.gte(1), z.lte(5))),
  start_date: z.optional(isoTimestamp),
  end_date: z.optional(isoTimestamp),
});

/** D8 scope jobs:read; date range defaults to the last 30 days. */
export const handler = routeWithoutIdempotencyKey('submissions.list', { query }, async (req) => ({
  body: await listTenantSubmissions(req.buyer, req.query),
}));
