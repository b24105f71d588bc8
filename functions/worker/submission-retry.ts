import { route } from '../../shared/http/route';
import { handleUploadRequest, uploadBodySchema } from '../../shared/work/upload-request';
import type { SubmissionItem } from '../../shared/work/model';
import { responseSealer } from '../../shared/secrets/sealer';

/** D27: a retry_pending submission takes one new upload (same body as /upload) within its retry window. */
export const handler = route('worker.submissions.retry', { body: uploadBodySchema }, async (req) =>
  handleUploadRequest(req.ctx, req.resource as SubmissionItem, 'retry', req),
  { sealer: responseSealer }, // a replay's stored answer holds the plan's pre-signed upload URLs
);
