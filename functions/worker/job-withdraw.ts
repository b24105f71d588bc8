import { route } from '../../shared/http/route';
import { withdrawFromJob } from '../../shared/work/release-reservation';

/** D23: give the reservation back; the slots are free again at once. */
export const handler = route('worker.jobs.withdraw', {}, async (req) => ({
  body: await withdrawFromJob(req.ctx, req.worker, req.resource.id as string),
}));
