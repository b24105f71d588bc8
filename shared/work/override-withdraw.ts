/**
 * Withdrawing an approved submission's Files (D71, override to reject), inside the override's
 * transaction:
 * - the File items are deleted (no longer listed, 404 on their routes);
 * - the duplicate guards and near-duplicate buckets of the files are removed (shared/trust), so
 *   the same picture can be delivered again;
 * - the job and money part is `addReversal` (shared/ledger/reversal.ts): a `reversal` row, the
 *   escrow back to the job, files_approved −n, a completed job reopened;
 * - the worker payout is marked `reversed`.
 * The delivered objects (the files and their keyframes) are then deleted from the bucket, so the
 * download URLs already handed out stop working: the keys are kept on the submission
 * (`withdrawn_object_keys`) and the `submission.overridden` event of the same commit queues their
 * deletion through the table stream (shared/work/withdrawn-objects.ts).
 */
import { paginateQuery } from '@aws-sdk/lib-dynamodb';
import { batchGetConsistent } from '../db/batch-get';
import { db, tableName } from '../db/client';
import { keys } from '../db/keys';
import type { Tx } from '../db/tx';
import { addReversal } from '../ledger/reversal';
import { removeApprovalIndexes } from '../trust/indexes';
import type { JobItem } from '../jobs/model';
import type { SubmissionItem } from './model';

/** The submission and the job were read on either side of a concurrent change: read again. */
export class StaleRead extends Error {
  constructor() {
    super('stale read: the submission and its job disagree');
    this.name = 'StaleRead';
  }
}

export interface Withdrawal {
  fileIds: string[];
  reversedCents: number;
  objectKeys: string[];
}

type Item = Record<string, unknown>;

/** The Files, every key read (a batch may leave keys unprocessed: they are read again, not taken for missing). */
async function readFiles(ids: string[]): Promise<Item[]> {
  if (ids.length === 0) return [];
  return [...(await batchGetConsistent(ids.map((id) => keys.file(id)))).values()];
}

/** The payout of the approval: by the id kept on the submission, else found in the worker's payouts. */
async function payoutKeyOf(sub: SubmissionItem) {
  if (typeof sub.payout_id === 'string') return keys.workerPayout(sub.worker_id, sub.payout_id);
  const k = keys.workerPayout(sub.worker_id, '');
  const pages = paginateQuery(
    { client: db() },
    {
      TableName: tableName(),
      KeyConditionExpression: 'PK = :pk AND begins_with(SK, :pay)',
      FilterExpression: 'submission_id = :sid',
      ExpressionAttributeValues: { ':pk': k.PK, ':pay': k.SK, ':sid': sub.id },
      ConsistentRead: true,
    },
  );
  for await (const page of pages) {
    const hit = page.Items?.[0];
    if (hit) return { PK: hit.PK as string, SK: hit.SK as string };
  }
  return null;
}

/**
 * Adds the withdrawal of `sub`'s Files to `tx`. The caller adds the submission update (with
 * `withdrawn_object_keys`: one operation per item per transaction).
 */
export async function addWithdrawal(
  tx: Tx,
  sub: SubmissionItem,
  job: JobItem,
  summary: { add: string[]; names: Record<string, string>; values: Record<string, unknown> },
  at: string,
): Promise<Withdrawal> {
  const fileIds = (sub.file_ids?.length ? sub.file_ids : sub.uploads.map((u) => u.file_id)) as string[];
  const files = await readFiles(fileIds);
  if (files.length !== fileIds.length || Number(job.files_approved) < files.length) throw new StaleRead();
  const objectKeys: string[] = [];
  for (const f of files) {
    tx.delete(`withdraw:${f.id as string}`, keys.file(f.id as string), { condition: 'attribute_exists(PK)' });
    objectKeys.push(f.object_key as string, ...((f.keyframes as { key: string }[] | null) ?? []).map((k) => k.key));
  }
  removeApprovalIndexes(
    tx,
    sub.org_id,
    sub.environment,
    files.map((f) => ({
      fileId: f.id as string,
      submissionId: sub.id,
      jobId: sub.job_id,
      contentHash: (f.content_hash as string) ?? '',
      perceptualHash: (f.perceptual_hash as string | null) ?? null,
      contentType: f.content_type as string,
    })),
  );
  const { reversedCents } = addReversal(tx, { job, submissionId: sub.id, files: files.length, jobUpdate: summary });
  const payout = await payoutKeyOf(sub);
  if (payout) {
    tx.update('payout', payout, 'SET #st = :prev, reversed_at = :pt', {
      condition: 'attribute_exists(PK) AND #st <> :prev',
      names: { '#st': 'status' },
      values: { ':prev': 'reversed', ':pt': at },
    });
  }
  return { fileIds: files.map((f) => f.id as string), reversedCents, objectKeys };
}
