import { routeWithoutIdempotencyKey } from '../../shared/http/route-without-key';
import { listQuery } from '../../shared/http/schemas';
import { listExports } from '../../shared/exports';

/** The job's exports, newest first (D12 pagination). */
export const handler = routeWithoutIdempotencyKey('jobs.exports.list', { query: listQuery({}) }, async (req) => ({
  body: await listExports(req.resource.id as string, req.query),
}));
