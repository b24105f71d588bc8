/** Which submission and planned file a pipeline message is about (D54), and what becomes of an object none will deliver. */
import { logger } from '../logger';
import { parseUploadKey, tagVerdict } from '../storage/s3';
import { getSubmissionItem } from './reservations';
import type { FilePart, PlannedUpload, SubmissionItem } from './model';

export interface Located {
  sub: SubmissionItem;
  upload: PlannedUpload;
  part: FilePart;
}

/**
 * The submission and planned file of an upload, or null (unknown, stale round, decided). With
 * `rejected`, also a rejected submission no override has decided yet: the annotation stage still
 * annotates it, since an override may deliver it and a File carries its annotations (D54, D71).
 */
export async function locateFile(ref: { subId: string; round: string; fileId: string }, opts: { rejected?: boolean } = {}): Promise<Located | null> {
  const sub = await getSubmissionItem(ref.subId);
  if (!sub || sub.round !== ref.round) return null;
  const overridable = opts.rejected === true && sub.status === 'rejected' && !sub.override;
  if (!overridable && !['awaiting_upload', 'pending_score', 'retry_pending'].includes(sub.status)) return null;
  const upload = sub.uploads.find((u) => u.file_id === ref.fileId);
  if (!upload) return null;
  return { sub, upload, part: sub.parts?.[ref.fileId] ?? {} };
}

/**
 * An upload object no submission will deliver (it landed after its reservation ended or its job was
 * cancelled, or it belongs to a round that was replaced) is tagged like a rejection's bytes, so the
 * lifecycle rule deletes it instead of keeping it for ever. The delivered bytes of an approved
 * submission, and the current round of one still in play, are never touched. Best effort.
 */
export async function tagIfNeverDelivered(key: string): Promise<void> {
  const ref = parseUploadKey(key);
  if (!ref) return;
  const sub = await getSubmissionItem(ref.subId);
  const current = sub?.round === ref.round;
  if (sub && current && ['approved', 'awaiting_upload', 'pending_score', 'retry_pending'].includes(sub.status)) return;
  await tagVerdict([key], 'rejected').catch((err: Error) => logger.warn('tagging an undelivered upload failed; it is kept', { error: err, key }));
}
