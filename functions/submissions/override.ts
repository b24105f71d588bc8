import * as z from '../../shared/zod';
import { route } from '../../shared/http/route';
import { overrideSubmission, OVERRIDE_REASON_CODES } from '../../shared/work/override';
import type { SubmissionItem } from '../../shared/work/model';
import { responseSealer } from '../../shared/secrets/sealer';

const body = z
  .strictObject({
    decision: z.enum(['approve', 'reject']),
    reason_code: z.optional(z.enum(OVERRIDE_REASON_CODES)),
    note: z.optional(z.string().check(z.maxLength(500))),
  })
  .check(
    z.refine((b) => b.decision !== 'reject' || b.reason_code !== undefined, {
      path: ['reason_code'],
      message: 'reason_code is required to reject',
    }),
  );

// D71: approve a rejected / retry_pending submission, or reject an approved one, within 7 days of
// its verdict; conflicts are 409 with details[0].code.
export const handler = route('submissions.override', { body }, async (req) => ({
  body: await overrideSubmission(req.ctx, req.resource as SubmissionItem, req.body),
}), { sealer: responseSealer }); // an approval's answer carries a signed download URL: stored sealed
