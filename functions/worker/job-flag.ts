import * as z from '../../shared/zod';
import { route } from '../../shared/http/route';
import { flagJob } from '../../shared/work/flags';

const body = z.strictObject({ reason: z.string().check(z.trim(), z.minLength(1), z.maxLength(1000)) });

/** D35 `job.flagged`: once per worker per job. */
export const handler = route('worker.jobs.flag', { body }, async (req) => ({
  body: await flagJob(req.ctx, req.worker, req.resource.id as string, req.body.reason),
}));
