import * as z from '../../shared/zod';
import { routeWithoutIdempotencyKey } from '../../shared/http/route-without-key';
import { listQuery } from '../../shared/http/schemas';
import { listJobSubmissions } from '../../shared/work/queries';
import { BUYER_STATUSES } from '../../shared/work/model';
import type { JobItem } from '../../shared/jobs/model';

const query = listQuery({ status: z.optional(z.enum(BUYER_STATUSES)) });

export const handler = routeWithoutIdempotencyKey('jobs.submissions.list', { query }, async (req) => ({
  body: await listJobSubmissions(req.resource as JobItem, req.query),
}));
