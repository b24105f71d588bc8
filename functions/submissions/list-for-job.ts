import * as z from 'zod';
import { route } from '../../shared/http/route';
import { listQuery } from '../../shared/http/schemas';
import { listJobSubmissions } from '../../shared/work/queries';
import { BUYER_STATUSES } from '../../shared/work/model';
import type { JobItem } from '../../shared/jobs/model';

const query = listQuery({ status: z.enum(BUYER_STATUSES).optional() });

export const handler = route('jobs.submissions.list', { query }, async (req) => ({
  body: await listJobSubmissions(req.resource as JobItem, req.query),
}));
