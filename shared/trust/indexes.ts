/**
 * The trust indexes kept by approvals and withdrawals (D26 organization-wide, D69): the tenant's
 * content-hash guard and the near-duplicate buckets. Split from ./index so that the routes that
 * approve or withdraw (upload, override) never load the image decoder that hashing needs.
 */
import { keys } from '../db/keys';
import type { Tx } from '../db/tx';
import type { Env } from '../types';
import { isPerceptualHash } from './hash';
import { addToNearDuplicateIndex, removeFromNearDuplicateIndex } from './neardup';

export const hexOf = (contentHash: string): string => contentHash.replace(/^sha256:/, '');

export interface ApprovedFileRef {
  fileId: string;
  submissionId: string;
  jobId: string;
  contentHash: string;
  perceptualHash: string | null | undefined;
  contentType: string;
}

/**
 * Inside the approval transaction: the job's duplicate-bytes guard (D26, labelled `hash:<file>`,
 * so identical bytes are approved once per job), the tenant's (labelled `hash:org:<file>`, so a
 * concurrent approval of identical bytes fails it like the job's guard) and the near-duplicate
 * buckets of the approved images. removeApprovalIndexes takes all of them back.
 */
export function addApprovalIndexes(tx: Tx, orgId: string, env: Env, files: ApprovedFileRef[], at: string): void {
  for (const f of files) {
    if (!f.contentHash) continue;
    tx.create(`hash:${f.fileId}`, {
      ...keys.jobContentHash(f.jobId, hexOf(f.contentHash)),
      entity: 'job_content_hash',
      job_id: f.jobId,
      file_id: f.fileId,
      submission_id: f.submissionId,
      created_at: at,
    });
    tx.create(`hash:org:${f.fileId}`, {
      ...keys.tenantContentHash(orgId, env, hexOf(f.contentHash)),
      entity: 'tenant_content_hash',
      org_id: orgId,
      environment: env,
      job_id: f.jobId,
      file_id: f.fileId,
      submission_id: f.submissionId,
      created_at: at,
    });
  }
  const images = files.filter((f) => f.contentType.startsWith('image/') && isPerceptualHash(f.perceptualHash));
  addToNearDuplicateIndex(tx, orgId, env, images.map((f) => ({ fileId: f.fileId, hash: f.perceptualHash! })));
}

/** Inside a withdrawal: the file no longer blocks identical or similar uploads. */
export function removeApprovalIndexes(tx: Tx, orgId: string, env: Env, files: ApprovedFileRef[]): void {
  for (const f of files) {
    if (!f.contentHash) continue;
    const mine = { condition: 'attribute_not_exists(PK) OR file_id = :f', values: { ':f': f.fileId } };
    tx.delete(`unhash:org:${f.fileId}`, keys.tenantContentHash(orgId, env, hexOf(f.contentHash)), mine);
    tx.delete(`unhash:job:${f.fileId}`, keys.jobContentHash(f.jobId, hexOf(f.contentHash)), mine);
  }
  const images = files.filter((f) => f.contentType.startsWith('image/') && isPerceptualHash(f.perceptualHash));
  removeFromNearDuplicateIndex(tx, orgId, env, images.map((f) => ({ fileId: f.fileId, hash: f.perceptualHash! })));
}
