import { route } from '../../shared/http/route';
import { handleUploadRequest, uploadBodySchema } from '../../shared/work/upload-request';
import type { SubmissionItem } from '../../shared/work/model';
import { responseSealer } from '../../shared/secrets/sealer';

/**
 * D24, D25, D45: multipart/form-data (field `file`, up to files_per_submission) → 202 with the
 * pending_score submission; JSON `{files:[…]}` → 200 with pre-signed PUT URLs for large files.
 */
export const handler = route('worker.submissions.upload', { body: uploadBodySchema }, async (req) =>
  handleUploadRequest(req.ctx, req.resource as SubmissionItem, 'upload', req),
  { sealer: responseSealer }, // a replay's stored answer holds the plan's pre-signed upload URLs
);
