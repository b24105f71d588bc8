/** Which submission and planned file a pipeline message is about (D54). */
import { getSubmissionItem } from './reservations';
import type { FilePart, PlannedUpload, SubmissionItem } from './model';

export interface Located {
  sub: SubmissionItem;
  upload: PlannedUpload;
  part: FilePart;
}

/** The submission and planned file of an upload, or null (unknown, stale round, decided). */
export async function locateFile(ref: { subId: string; round: string; fileId: string }): Promise<Located | null> {
  const sub = await getSubmissionItem(ref.subId);
  if (!sub || sub.round !== ref.round) return null;
  if (!['awaiting_upload', 'pending_score', 'retry_pending'].includes(sub.status)) return null;
  const upload = sub.uploads.find((u) => u.file_id === ref.fileId);
  if (!upload) return null;
  return { sub, upload, part: sub.parts?.[ref.fileId] ?? {} };
}

