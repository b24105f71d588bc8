/**
 * Trust checks before scoring (D26 organization-wide, D69, D70) and the indexes they read.
 *
 * `trustChecks` runs in the pipeline's pre-check step, after the file was measured: it computes the
 * image's perceptual hash, and rejects (1 star, no model call, no charge) bytes identical to a file
 * already approved anywhere in the organization and environment (`duplicate`), an image within
 * NEAR_DUPLICATE_MAX_DISTANCE bits of an approved image (`near_duplicate`), and a capture point
 * outside the job's radius (`location_mismatch`). It also yields the File fields
 * `perceptual_hash` and `location_verified`, which the pipeline stores with the file's part.
 *
 * `addApprovalIndexes` is called inside the approval transaction (the content-hash guard of the
 * tenant and the near-duplicate buckets); `removeApprovalIndexes` inside a withdrawal (override).
 */
import { GetCommand } from '@aws-sdk/lib-dynamodb';
import { db, tableName } from '../db/client';
import { keys } from '../db/keys';
import type { Tx } from '../db/tx';
import type { Env } from '../types';
import { logger } from '../logger';
import type { ReasonCode } from '../scoring/types';
import { perceptualHash, isPerceptualHash } from './phash';
import { findNearDuplicate, addToNearDuplicateIndex, removeFromNearDuplicateIndex, NEAR_DUPLICATE_MAX_DISTANCE } from './neardup';
import { checkLocation, jobPoint } from './location';

export { NEAR_DUPLICATE_MAX_DISTANCE };

/** A failed trust check: its reason code (D68) and a sentence for the worker (scoring/precheck `precheckRejection`). */
export interface TrustFailure {
  code: Extract<ReasonCode, 'duplicate' | 'near_duplicate' | 'location_mismatch'>;
  reason: string;
}

/** What the trust checks add to a file's part (and later to its File). */
export interface TrustAttrs {
  perceptual_hash: string | null;
  location_verified: boolean | null;
}

export interface TrustInput {
  orgId: string;
  env: Env;
  /** the job's `location` ({latitude, longitude, radius_km, ...} or null) */
  jobLocation: unknown;
  contentType: string;
  bytes: Buffer;
  metadata: { content_hash: string; latitude?: number | null; longitude?: number | null };
}

const hexOf = (contentHash: string) => contentHash.replace(/^sha256:/, '');

async function approvedInTenant(orgId: string, env: Env, contentHash: string): Promise<boolean> {
  if (!contentHash) return false;
  const out = await db().send(new GetCommand({ TableName: tableName(), Key: keys.tenantContentHash(orgId, env, hexOf(contentHash)), ConsistentRead: true }));
  return !!out.Item;
}

export async function trustChecks(input: TrustInput): Promise<{ failures: TrustFailure[]; attrs: TrustAttrs }> {
  const failures: TrustFailure[] = [];
  const image = input.contentType.startsWith('image/');
  let hash: string | null = null;
  if (image) {
    hash = await perceptualHash(input.bytes).catch((err: Error) => {
      logger.info('perceptual hash failed: the image does not decode', { error: err.message });
      return null;
    });
  }
  const [duplicate, near] = await Promise.all([
    approvedInTenant(input.orgId, input.env, input.metadata.content_hash),
    hash ? findNearDuplicate(input.orgId, input.env, hash) : Promise.resolve(null),
  ]);
  if (duplicate) failures.push({ code: 'duplicate', reason: 'the file is identical to a file already approved in this organization' });
  else if (near?.match) {
    failures.push({
      code: 'near_duplicate',
      reason: `the image is a near-copy of an image already approved in this organization (${near.match.distance} of 64 perceptual-hash bits differ; ${NEAR_DUPLICATE_MAX_DISTANCE} or fewer count as the same picture)`,
    });
  }
  const loc = checkLocation(jobPoint(input.jobLocation), input.metadata);
  if ('mismatch' in loc) {
    failures.push({
      code: 'location_mismatch',
      reason: `the capture point is ${loc.distance_km.toFixed(1)} km from the job's location, outside its ${loc.radius_km} km radius`,
    });
  }
  return { failures, attrs: { perceptual_hash: hash, location_verified: 'mismatch' in loc ? false : loc.verified } };
}

export interface ApprovedFileRef {
  fileId: string;
  submissionId: string;
  jobId: string;
  contentHash: string;
  perceptualHash: string | null | undefined;
  contentType: string;
}

/**
 * Inside the approval transaction: the tenant's duplicate-bytes guard (labelled `hash:org:<file>`,
 * so a concurrent approval of identical bytes fails it like the job's guard) and the
 * near-duplicate buckets of the approved images.
 */
export function addApprovalIndexes(tx: Tx, orgId: string, env: Env, files: ApprovedFileRef[], at: string): void {
  for (const f of files) {
    if (!f.contentHash) continue;
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
