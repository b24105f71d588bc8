import { routeWithoutIdempotencyKey } from '../../shared/http/route-without-key';
import { presentSubmission, type SubmissionItem } from '../../shared/work/model';
import { approvedFileUrl } from '../../shared/files';

export const handler = routeWithoutIdempotencyKey('submissions.get', {}, async (req) => {
  // D24: worker-only submissions answer 404 (the resource middleware).
  const sub = req.resource as SubmissionItem;
  return { body: presentSubmission(sub, await approvedFileUrl(sub)) };
});
