/**
 * Trust checks before scoring (D26 organization-wide, D69, D70) and the indexes they read.
 *
 * `trustChecks` runs in the pipeline's pre-check step, after the file was measured: it computes the
 * image's perceptual hash, and rejects (1 star, no model call, no charge) bytes identical to a file
 * already approved anywhere in the organization and environment (`duplicate`), an image within
 * NEAR_DUPLICATE_MAX_DISTANCE bits of an approved image (`near_duplicate`), and a capture point
 * outside the job's radius (`location_mismatch`). It also yields the File fields
 * `perceptual_hash` and `location_verified`, which the pipeline stores with the file's part. The
 * pipeline reads the keys of `trustReads` in the same batch as the job and the job's duplicate guard
 * (one call), then applies `trustResult`.
 *
 * `addApprovalIndexes` is called inside the approval transaction (the content-hash guard of the
 * tenant and the near-duplicate buckets); `removeApprovalIndexes` inside a withdrawal (override).
 */
import { batchGetConsistent, keyId, type ItemsByKey } from '../db/batch-get';
import { keys, type Key } from '../db/keys';
import type { Tx } from '../db/tx';
import type { Env } from '../types';
import { logger } from '../logger';
import type { ReasonCode } from '../scoring/types';
import { perceptualHash } from './phash';
import { nearDuplicateIn, probeKeysOf, NEAR_DUPLICATE_MAX_DISTANCE } from './neardup';
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

import { hexOf } from './indexes';
import { isMachineryFailure } from '../media/failures';

/** What the checks read, known once the image is hashed: the tenant's content-hash guard and the near-duplicate buckets. */
export interface TrustReads {
  hash: string | null;
  keys: Key[];
}

/** Hashes the image (D69) and names the keys `trustResult` needs, so a caller can batch them with its own reads. */
export async function trustReads(input: Omit<TrustInput, 'jobLocation'>): Promise<TrustReads> {
  let hash: string | null = null;
  if (input.contentType.startsWith('image/')) {
    hash = await perceptualHash(input.bytes).catch((err: Error) => {
      // A decoder that failed to load or was stopped is no property of the image: the step fails
      // and is retried, rather than approving without the near-duplicate check.
      if (isMachineryFailure(err)) throw err;
      logger.info('perceptual hash failed: the image does not decode', { error: err.message });
      return null;
    });
  }
  const guard = input.metadata.content_hash ? [keys.tenantContentHash(input.orgId, input.env, hexOf(input.metadata.content_hash))] : [];
  return { hash, keys: [...guard, ...(hash ? probeKeysOf(input.orgId, input.env, hash) : [])] };
}

/** The checks on the items read (a strongly consistent read of at least `reads.keys`). */
export function trustResult(input: TrustInput, reads: TrustReads, items: ItemsByKey): { failures: TrustFailure[]; attrs: TrustAttrs } {
  const failures: TrustFailure[] = [];
  const { hash } = reads;
  const duplicate = !!input.metadata.content_hash && items.has(keyId(keys.tenantContentHash(input.orgId, input.env, hexOf(input.metadata.content_hash))));
  const near = hash ? nearDuplicateIn(input.orgId, input.env, hash, items) : null;
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

/** Every trust check with its own read (one strongly consistent batch). */
export async function trustChecks(input: TrustInput): Promise<{ failures: TrustFailure[]; attrs: TrustAttrs }> {
  const reads = await trustReads(input);
  return trustResult(input, reads, await batchGetConsistent(reads.keys));
}

export { addApprovalIndexes, removeApprovalIndexes, type ApprovedFileRef } from './indexes';
