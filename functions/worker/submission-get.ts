import { route } from '../../shared/http/route';
import { presentWorkerSubmission, type SubmissionItem } from '../../shared/work/model';

/** Polled by the worker's app for the score (D45 worker view). */
export const handler = route('worker.submissions.get', {}, async (req) => ({
  body: presentWorkerSubmission(req.resource as SubmissionItem),
}));
