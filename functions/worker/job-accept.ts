import { route } from '../../shared/http/route';
import { acceptJob } from '../../shared/work/accept-job';

/** D23, D24, D45: reserve files_per_submission slots for 60 minutes; 201 with the awaiting_upload submission. */
export const handler = route('worker.jobs.accept', {}, async (req) => ({
  status: 201,
  body: await acceptJob(req.ctx, req.worker, req.resource.id as string),
}));
