import * as z from '../../shared/zod';
import { routeWithoutIdempotencyKey } from '../../shared/http/route-without-key';
import { listQuery } from '../../shared/http/schemas';
import { listFilesForJob } from '../../shared/files';

const query = listQuery({ min_score: z._default(z.coerce.number().check(z.int(), z.gte(1), z.lte(5)), 3) });

/** Approved files with ai_star_rating ≥ min_score (default 3); fresh 7-day URLs on every call (D30). */
export const handler = routeWithoutIdempotencyKey('jobs.files.list', { query }, async (req) => ({
  body: await listFilesForJob(req.resource, req.query),
}));
