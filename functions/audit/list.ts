import * as z from '../../shared/zod';
import { routeWithoutIdempotencyKey } from '../../shared/http/route-without-key';
import { listQuery } from '../../shared/http/schemas';
import { listAudit } from '../../shared/audit';

const query = listQuery({
  job_id: z.optional(z.string().check(z.minLength(1), z.maxLength(64))),
  event_type: z.optional(z.string().check(z.minLength(1), z.maxLength(64))),
});

export const handler = routeWithoutIdempotencyKey('audit_events.list', { query }, async (req) => ({
  body: await listAudit(req.buyer.orgId, req.query),
}));
