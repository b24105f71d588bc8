/**
 * When a buyer may override a verdict (D71): the window, the reason codes, and the 409 `conflict`
 * each refused case answers, in the documented order (override.ts).
 */
import { addMs, now, DAY_MS } from '../clock';
import { REASON_CODES } from '../scoring/types';
import { errors } from '../errors';
import { freeSlots, type JobItem } from '../jobs/model';
import { approvalAllowed } from '../ledger/escrow';
import { REVERSIBLE_STATUSES } from '../ledger/reversal';
import { retryInFlight, type SubmissionItem } from './model';

export const OVERRIDE_WINDOW_MS = 7 * DAY_MS;
/** D68's reason codes and `other`. */
export const OVERRIDE_REASON_CODES = [...REASON_CODES, 'other'] as const;
export type OverrideReasonCode = (typeof OVERRIDE_REASON_CODES)[number];

export interface OverrideInput {
  decision: 'approve' | 'reject';
  reason_code?: OverrideReasonCode | null;
  note?: string | null;
}

export type OverrideConflict = 'invalid_state' | 'override_window_closed' | 'job_cancelled' | 'no_free_slot';

export const conflict = (code: OverrideConflict, message: string) => errors.conflict(message, [{ field: 'submission_id', message, code }]);

/** The conflict, if any, for this decision on this submission and job (D71), in the documented order. */
export function overrideConflict(sub: SubmissionItem, job: JobItem | undefined, decision: OverrideInput['decision'], at: Date = now()) {
  const from = decision === 'approve' ? ['rejected', 'retry_pending'] : ['approved'];
  if (sub.override) return conflict('invalid_state', 'This submission was already overridden; an override is final.');
  if (!from.includes(sub.status) || !sub.scored_at) {
    return conflict('invalid_state', `Only ${from.join(' or ')} submissions can be ${decision === 'approve' ? 'approved' : 'rejected'} by override; this one is ${sub.status}.`);
  }
  const closes = addMs(new Date(sub.scored_at), OVERRIDE_WINDOW_MS);
  if (at.getTime() > closes.getTime()) return conflict('override_window_closed', `The override window closed at ${closes.toISOString()}, 7 days after the verdict.`);
  if (!job || job.status === 'cancelled') return conflict('job_cancelled', 'The job is cancelled; its verdicts can no longer change.');
  if (decision === 'reject' && !REVERSIBLE_STATUSES.includes(job.status)) return conflict('invalid_state', `The job is ${job.status}.`);
  if (decision === 'approve') {
    // A retry_pending submission whose worker has started the retry holds a new round that nothing
    // has scored yet: approving now would pay for bytes the buyer never saw (and that may never
    // arrive). The override's transaction is conditioned on the round it read, so a retry that
    // starts after this read makes it fail instead.
    // A retry that was planned and never completed (its files landed and scored or not, or its
    // window ran out) holds files no verdict covered: the same refusal.
    const unscored = sub.uploads.some((u) => !sub.parts?.[u.file_id]?.score);
    if (unscored || retryInFlight(sub)) {
      return conflict(
        'invalid_state',
        sub.status === 'retry_pending'
          ? 'The worker is uploading a retry of this submission; wait for its verdict, then override that.'
          : "This submission's retry never completed, so its files were never judged; they cannot be approved.",
      );
    }
    // A File is created with its annotations and never changes (D54): a file the annotation stage
    // has not finished (a pre-check rejected it first; the stage goes on) cannot be approved yet.
    if (sub.uploads.some((u) => sub.parts?.[u.file_id]?.annotations === undefined)) {
      return conflict('invalid_state', 'A file of this submission is still being annotated, and a File is delivered with its annotations; retry in a minute.');
    }
    // A file whose bytes the annotation stage could not decode has no annotations to deliver (D54:
    // a File always carries them): it cannot be approved.
    if (sub.uploads.some((u) => (sub.parts?.[u.file_id] as { annotation_error?: unknown } | undefined)?.annotation_error)) {
      return conflict('invalid_state', 'A file of this submission could not be decoded for annotation; it cannot be delivered, so it cannot be approved.');
    }
    // D26: identical bytes are delivered once per job, so a submission two of whose files are
    // identical (rejected as `duplicate`) cannot be approved whole; its transaction would also
    // name the job's and the tenant's hash items twice, which DynamoDB refuses outright.
    const hashes = sub.uploads.map((u) => sub.parts?.[u.file_id]?.metadata?.content_hash).filter((h): h is string => !!h);
    if (new Set(hashes).size !== hashes.length) {
      return conflict('invalid_state', 'Two files of this submission are identical, and identical bytes are delivered once per job; it cannot be approved.');
    }
    const n = sub.uploads.length;
    // A retry_pending submission still holds its slots in files_pending; a rejected one needs free ones.
    const slotsOk = sub.status === 'retry_pending' ? approvalAllowed(job, n) : approvalAllowed(job, n) && freeSlots(job) >= n;
    if (!slotsOk) return conflict('no_free_slot', `The job has no free slot for ${n} more file${n > 1 ? 's' : ''} (it is ${job.status}).`);
  }
  return null;
}
