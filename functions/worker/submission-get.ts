import { routeWithoutIdempotencyKey } from '../../shared/http/route-without-key';
import { presentWorkerSubmission, type SubmissionItem } from '../../shared/work/model';

/** Polled by the worker's app for the score (D45 worker view). */
export const handler = routeWithoutIdempotencyKey('worker.submissions.get', {}, async (req) => ({
  body: presentWorkerSubmission(req.resource as SubmissionItem),
}));
