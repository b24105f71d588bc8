/**
 * The near-duplicate index (D69): approved images of a tenant (organization + environment), found
 * by perceptual-hash distance with a bounded number of reads.
 *
 * Rule: a new image is a near-duplicate when its 64-bit hash differs from an approved image's hash
 * in at most NEAR_DUPLICATE_MAX_DISTANCE (9) bits. Measured on photos: re-encoding, recompressing
 * (JPEG quality 10), halving the size or brightening by 15 % changes 0–6 bits; different scenes
 * differ in 16 or more.
 *
 * Index: the 64 bits are split into BANDS = 5 bands (13, 13, 13, 13, 12 bits). Each approved image
 * is recorded in 5 buckets, one per band, keyed by (tenant, band, the band's value)
 * (`keys.perceptualHashBucket`). Recall bound (pigeonhole): if two hashes differ in at most 9 bits,
 * at least one of the 5 bands differs in at most 1 bit (if every band differed in 2 or more, the
 * total would be 10 or more). So a check reads, for each band, the bucket of the band's exact value
 * and of every value one bit away: 4 × (1 + 13) + (1 + 12) = 69 buckets, one BatchGetItem, whatever
 * the organization's size; every candidate found is then compared on all 64 bits. Recall is exact
 * for the threshold (no near-duplicate within 9 bits is missed); a bucket holds on average N / 8192
 * of the tenant's N images (about 12 at 100,000), so the bytes read grow slowly while the number of
 * items read stays 69.
 */
import { batchGetConsistent, keyId, type ItemsByKey } from '../db/batch-get';
import { keys, type Key } from '../db/keys';
import type { Tx } from '../db/tx';
import type { Env } from '../types';
import { hammingDistance } from './hash';

export const NEAR_DUPLICATE_MAX_DISTANCE = 9;
const BAND_WIDTHS = [13, 13, 13, 13, 12] as const;
export const BANDS = BAND_WIDTHS.length;
/** Buckets one check reads: Σ over bands of (1 + width). */
export const BUCKETS_PER_CHECK = BAND_WIDTHS.reduce((s, w) => s + 1 + w, 0);
const ENTRY_PREFIX = 'h#';

/** The value of each band of a hash (most significant bits first). */
export function bandValues(hash: string): number[] {
  let v = BigInt(`0x${hash}`);
  const out: number[] = [];
  for (let i = BAND_WIDTHS.length - 1; i >= 0; i--) {
    const w = BigInt(BAND_WIDTHS[i]!);
    out[i] = Number(v & ((1n << w) - 1n));
    v >>= w;
  }
  return out;
}

const hex = (n: number) => n.toString(16).padStart(4, '0');

/** The bucket keys an image with `hash` is recorded under (one per band). */
export function indexKeysOf(org: string, env: Env, hash: string): Key[] {
  return bandValues(hash).map((v, band) => keys.perceptualHashBucket(org, env, band, hex(v)));
}

/** The buckets a check reads: each band's value and every value one bit away from it. */
export function probeKeysOf(org: string, env: Env, hash: string): Key[] {
  const out: Key[] = [];
  bandValues(hash).forEach((v, band) => {
    out.push(keys.perceptualHashBucket(org, env, band, hex(v)));
    for (let b = 0; b < BAND_WIDTHS[band]!; b++) out.push(keys.perceptualHashBucket(org, env, band, hex(v ^ (1 << b))));
  });
  return out;
}

export interface NearDuplicateMatch {
  file_id: string;
  perceptual_hash: string;
  distance: number;
}

export interface NearDuplicateLookup {
  /** the closest approved image within the threshold, or null */
  match: NearDuplicateMatch | null;
  /** buckets requested (always BUCKETS_PER_CHECK) and buckets that exist */
  keysRequested: number;
  itemsRead: number;
  /** candidates compared on all 64 bits */
  candidates: number;
}

/** The closest approved image of the tenant within NEAR_DUPLICATE_MAX_DISTANCE bits of `hash`. */
export async function findNearDuplicate(org: string, env: Env, hash: string): Promise<NearDuplicateLookup> {
  return nearDuplicateIn(org, env, hash, await batchGetConsistent(probeKeysOf(org, env, hash)));
}

/**
 * The same answer from buckets already read (`items` holds at least the probe keys' items; others
 * are ignored), so a caller can read the buckets in one batch with other keys it needs.
 */
export function nearDuplicateIn(org: string, env: Env, hash: string, items: ItemsByKey): NearDuplicateLookup {
  const probe = probeKeysOf(org, env, hash);
  const seen = new Map<string, string>();
  let itemsRead = 0;
  for (const key of probe) {
    const it = items.get(keyId(key));
    if (!it) continue;
    itemsRead++;
    for (const [k, v] of Object.entries(it)) if (k.startsWith(ENTRY_PREFIX) && typeof v === 'string') seen.set(k.slice(ENTRY_PREFIX.length), v);
  }
  let match: NearDuplicateMatch | null = null;
  for (const [fileId, h] of seen) {
    const d = hammingDistance(hash, h);
    if (d <= NEAR_DUPLICATE_MAX_DISTANCE && (!match || d < match.distance)) match = { file_id: fileId, perceptual_hash: h, distance: d };
  }
  return { match, keysRequested: probe.length, itemsRead, candidates: seen.size };
}

export interface IndexedImage {
  fileId: string;
  hash: string;
}

/** Group (bucket → images) so that each bucket item gets one operation in the transaction. */
function byBucket(org: string, env: Env, images: IndexedImage[]): Map<string, { key: Key; images: IndexedImage[] }> {
  const m = new Map<string, { key: Key; images: IndexedImage[] }>();
  for (const img of images) {
    for (const key of indexKeysOf(org, env, img.hash)) {
      const id = `${key.PK}|${key.SK}`;
      const e = m.get(id) ?? { key, images: [] };
      e.images.push(img);
      m.set(id, e);
    }
  }
  return m;
}

/** Record approved images in their buckets, inside the approval transaction. */
export function addToNearDuplicateIndex(tx: Tx, org: string, env: Env, images: IndexedImage[]): void {
  for (const [id, { key, images: imgs }] of byBucket(org, env, images)) {
    const names: Record<string, string> = {};
    const values: Record<string, unknown> = { ':ent': 'perceptual_hash_bucket' };
    const sets = imgs.map((img, i) => {
      names[`#h${i}`] = `${ENTRY_PREFIX}${img.fileId}`;
      values[`:h${i}`] = img.hash;
      return `#h${i} = :h${i}`;
    });
    tx.update(`phash:${id}`, key, `SET entity = :ent, ${sets.join(', ')}`, { names, values });
  }
}

/** Take withdrawn images out of their buckets, inside the withdrawing transaction. */
export function removeFromNearDuplicateIndex(tx: Tx, org: string, env: Env, images: IndexedImage[]): void {
  for (const [id, { key, images: imgs }] of byBucket(org, env, images)) {
    const names: Record<string, string> = {};
    imgs.forEach((img, i) => (names[`#h${i}`] = `${ENTRY_PREFIX}${img.fileId}`));
    tx.update(`phash:${id}`, key, `REMOVE ${imgs.map((_, i) => `#h${i}`).join(', ')}`, { names });
  }
}
