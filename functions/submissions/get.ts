import { routeWithoutIdempotencyKey } from '../../shared/http/route-without-key';
import { presentSubmission, type SubmissionItem } from '../../shared/work/model';
import { approvedFileUrl } from '../../shared/files';
import { errors } from '../../shared/errors';

export const handler = routeWithoutIdempotencyKey('submissions.get', {}, async (req) => {
  const sub = req.resource as SubmissionItem;
  // D24: worker-only statuses (withdrawn / expired reservations) are not the buyer's business.
  if (sub.status === 'withdrawn' || sub.status === 'expired') throw errors.notFound('submission', sub.id);
  return { body: presentSubmission(sub, await approvedFileUrl(sub)) };
});
