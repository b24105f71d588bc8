import * as z from 'zod';
import { route } from '../../shared/http/route';
import { listQuery } from '../../shared/http/schemas';
import { listAudit } from '../../shared/audit';

const query = listQuery({
  job_id: z.string().min(1).max(64).optional(),
  event_type: z.string().min(1).max(64).optional(),
});

export const handler = route('audit_events.list', { query }, async (req) => ({
  body: await listAudit(req.buyer.orgId, req.query),
}));
