import * as z from 'zod';
import { route } from '../../shared/http/route';
import { listQuery } from '../../shared/http/schemas';
import { listFilesForJob } from '../../shared/files';

const query = listQuery({ min_score: z.coerce.number().int().min(1).max(5).default(3) });

/** Approved files with ai_star_rating ≥ min_score (default 3); fresh 7-day URLs on every call (D30). */
export const handler = route('jobs.files.list', { query }, async (req) => ({
  body: await listFilesForJob(req.resource.id as string, req.query),
}));
