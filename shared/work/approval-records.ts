/** Rows every approval writes, whether the pipeline or a buyer's override takes it (D29, D71). */
import { keys } from '../db/keys';
import type { Tx } from '../db/tx';
import { emit } from '../outbox';
import type { SubmissionItem } from './model';

/**
 * The worker's payout row and the `submission.approved` event of an approval (by the pipeline or by
 * a buyer's override), inside the approval's transaction.
 */
export function addPayoutAndApprovedEvent(tx: Tx, sub: SubmissionItem, a: { payId: string; payout: number; files: number; stars: number; at: string }): void {
  tx.create('payout', {
    ...keys.workerPayout(sub.worker_id, a.payId),
    entity: 'worker_payout',
    id: a.payId,
    worker_id: sub.worker_id,
    job_id: sub.job_id,
    submission_id: sub.id,
    environment: sub.environment,
    files: a.files,
    amount_cents: a.payout,
    status: 'pending',
    created_at: a.at,
  });
  emit(tx, {
    orgId: sub.org_id,
    env: sub.environment,
    type: 'submission.approved',
    jobId: sub.job_id,
    data: { job_id: sub.job_id, submission_id: sub.id, ai_star_rating: a.stars, file_ids: sub.uploads.map((u) => u.file_id) },
  });
}
