/**
 * D69 near-duplicates and organization-wide duplicates.
 * - The perceptual hash: re-encoded, recompressed, resized (≥ 50 %) and lightly brightened copies
 *   stay within the threshold; different scenes do not.
 * - The index: the documented recall bound holds (any hash within the threshold shares a probed
 *   bucket), and a check reads a fixed number of buckets.
 * - End to end on the local runtime: a near-copy or an identical copy of an image approved in
 *   another job of the organization is rejected before scoring (1 star, no charge); a different
 *   scene is approved; another organization is not affected.
 * - The sandbox's simulated images are perceptually distinct.
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import sharp from 'sharp';
import fc from 'fast-check';
import { perceptualHash, hammingDistance } from '../../shared/trust/phash';
import { BUCKETS_PER_CHECK, NEAR_DUPLICATE_MAX_DISTANCE, indexKeysOf, probeKeysOf } from '../../shared/trust/neardup';
import { uniqueBytes } from '../../shared/sandbox/unique-bytes';
import { detailedJpeg as scene } from '../fixtures/media';
import { startTestRuntime, waitFor, type TestRuntime, indexesCaughtUp } from '../support/harness';
import { accept, createJob, liveBuyer, signupWorker, uploadFile, waitForVerdict } from './support';

// End to end through the real pipeline (models load on first use) on a shared machine: generous time.
jest.setTimeout(240_000);

const sample = readFileSync(path.join(__dirname, '../../samples/sample.jpg'));
const distance = async (a: Buffer, b: Buffer) => hammingDistance(await perceptualHash(a), await perceptualHash(b));

describe('D69: the perceptual hash', () => {
  let original: Buffer;
  beforeAll(async () => {
    original = await scene(800, 600, 7);
  });

  it('is 16 hex characters (64 bits)', async () => {
    expect(await perceptualHash(original)).toMatch(/^[0-9a-f]{16}$/);
  });

  it('a re-encoded copy (JPEG → PNG → WebP) is a near-duplicate', async () => {
    for (const img of [original, sample]) {
      expect(await distance(img, await sharp(img).png().toBuffer())).toBeLessThanOrEqual(NEAR_DUPLICATE_MAX_DISTANCE);
      expect(await distance(img, await sharp(img).webp({ quality: 80 }).toBuffer())).toBeLessThanOrEqual(NEAR_DUPLICATE_MAX_DISTANCE);
    }
  });

  it('a recompressed copy (JPEG quality 15) is a near-duplicate', async () => {
    for (const img of [original, sample]) {
      expect(await distance(img, await sharp(img).jpeg({ quality: 15 }).toBuffer())).toBeLessThanOrEqual(NEAR_DUPLICATE_MAX_DISTANCE);
    }
  });

  it('a copy resized to 50 % (and to 75 %) is a near-duplicate', async () => {
    for (const img of [original, sample]) {
      const { width } = await sharp(img).metadata();
      for (const f of [0.5, 0.75]) {
        const small = await sharp(img).resize(Math.round(width! * f)).jpeg({ quality: 80 }).toBuffer();
        expect(await distance(img, small)).toBeLessThanOrEqual(NEAR_DUPLICATE_MAX_DISTANCE);
      }
    }
  });

  it('a lightly brightened (+15 %) or darkened (−15 %) copy is a near-duplicate', async () => {
    for (const img of [original, sample]) {
      expect(await distance(img, await sharp(img).modulate({ brightness: 1.15 }).jpeg().toBuffer())).toBeLessThanOrEqual(NEAR_DUPLICATE_MAX_DISTANCE);
      expect(await distance(img, await sharp(img).modulate({ brightness: 0.85 }).jpeg().toBuffer())).toBeLessThanOrEqual(NEAR_DUPLICATE_MAX_DISTANCE);
    }
  });

  it('a different scene is not a near-duplicate', async () => {
    const scenes = [original, sample, await scene(800, 600, 1), await scene(800, 600, 2), await scene(800, 600, 42)];
    const hashes = await Promise.all(scenes.map(perceptualHash));
    for (let i = 0; i < hashes.length; i++) {
      for (let j = i + 1; j < hashes.length; j++) expect(hammingDistance(hashes[i]!, hashes[j]!)).toBeGreaterThan(NEAR_DUPLICATE_MAX_DISTANCE);
    }
  });
});

describe('D69: the band index', () => {
  const flip = (hash: string, bits: number[]) => {
    let v = BigInt(`0x${hash}`);
    for (const b of bits) v ^= 1n << BigInt(b);
    return v.toString(16).padStart(16, '0');
  };
  const hashArb = fc.bigInt({ min: 0n, max: (1n << 64n) - 1n }).map((v) => v.toString(16).padStart(16, '0'));
  const ids = (ks: { PK: string }[]) => new Set(ks.map((k) => k.PK));

  it('recall bound: every hash within the threshold shares at least one probed bucket with the stored one', () => {
    fc.assert(
      fc.property(hashArb, fc.uniqueArray(fc.integer({ min: 0, max: 63 }), { maxLength: NEAR_DUPLICATE_MAX_DISTANCE }), (stored, bits) => {
        const query = flip(stored, bits);
        const probed = ids(probeKeysOf('org_1', 'live', query));
        expect(indexKeysOf('org_1', 'live', stored).some((k) => probed.has(k.PK))).toBe(true);
      }),
      { numRuns: 2000 },
    );
  });

  it('a check reads a fixed number of buckets, whatever the hash', () => {
    fc.assert(
      fc.property(hashArb, (h) => {
        expect(ids(probeKeysOf('org_1', 'live', h)).size).toBe(BUCKETS_PER_CHECK);
      }),
    );
    expect(BUCKETS_PER_CHECK).toBe(69);
  });

  it('buckets belong to one organization and environment', () => {
    const h = '0123456789abcdef';
    const a = ids(indexKeysOf('org_1', 'live', h));
    for (const k of [...indexKeysOf('org_2', 'live', h), ...indexKeysOf('org_1', 'test', h)]) expect(a.has(k.PK)).toBe(false);
  });
});

describe('D53/D69: the sandbox simulated images are perceptually distinct', () => {
  it.each([['image/jpeg', 'sample.jpg', 30], ['image/png', 'sample.png', 8]] as const)('%s from %s: %i simulated uploads are pairwise farther apart than the threshold', async (ct, file, n) => {
    const src = readFileSync(path.join(__dirname, '../../samples', file));
    const hashes = await Promise.all(Array.from({ length: n }, async (_, i) => perceptualHash(await uniqueBytes(ct, src, `nonce-${i}`))));
    let min = 64;
    for (let i = 0; i < hashes.length; i++) for (let j = i + 1; j < hashes.length; j++) min = Math.min(min, hammingDistance(hashes[i]!, hashes[j]!));
    expect(min).toBeGreaterThan(NEAR_DUPLICATE_MAX_DISTANCE);
  });
});

describe('D69 end to end: near-copies of approved images are rejected organization-wide', () => {
  let rt: TestRuntime;
  beforeAll(async () => {
    process.env.LOCAL_FIXED_OTP = '123456';
    rt = await startTestRuntime();
  });
  afterAll(async () => {
    await rt?.stop();
  });

  const verdictOf = (token: string, subId: string) => waitForVerdict(rt, token, subId, 60_000);
  const submit = async (jobId: string, bytes: Buffer) => {
    const w = await signupWorker(rt);
    const a = await accept(rt, w.token, jobId);
    expect(a.status).toBe(201);
    expect((await uploadFile(rt, w.token, a.json.id, bytes)).status).toBe(202);
    return verdictOf(w.token, a.json.id);
  };
  const deductionsFor = async (key: string, subId: string) =>
    ((await indexesCaughtUp(), await rt.request('GET', '/v1/billing/transactions?type=deduction&limit=100', { key })).json.data as { submission_id: string }[]).filter(
      (t) => t.submission_id === subId,
    );

  it('a resized, recompressed copy and an identical copy in another job are rejected with 1 star and no charge; a different scene is approved', async () => {
    const buyer = await liveBuyer(rt);
    const original = await scene(800, 600, 11);
    const job1 = await createJob(rt, buyer.live, { files_needed: 1 });
    const first = await submit(job1.id, original);
    expect(first.status).toBe('approved');
    const files = (await rt.request('GET', `/v1/jobs/${job1.id}/files`, { key: buyer.live })).json.data;
    expect(files[0].perceptual_hash).toBe(await perceptualHash(original));

    // job1 is completed: a second job of the same organization (free tier: one active job at a time).
    const job2 = await createJob(rt, buyer.live, { files_needed: 3 });
    const copy = await sharp(original).resize(400).modulate({ brightness: 1.1 }).jpeg({ quality: 60 }).toBuffer();
    const near = await submit(job2.id, copy);
    expect(near).toMatchObject({ status: 'rejected', ai_star_rating: 1 });
    expect(near.ai_reasoning).toMatch(/near-copy of an image already approved/);
    expect(await deductionsFor(buyer.live, near.id)).toEqual([]);

    const same = await submit(job2.id, original);
    expect(same).toMatchObject({ status: 'rejected', ai_star_rating: 1 });
    expect(same.ai_reasoning).toMatch(/identical to a file already approved in this organization/);
    expect(await deductionsFor(buyer.live, same.id)).toEqual([]);

    const other = await submit(job2.id, await scene(800, 600, 12));
    expect(other.status).toBe('approved');
    expect(await deductionsFor(buyer.live, other.id)).toHaveLength(1);
  });

  it('another organization may deliver the same picture', async () => {
    const a = await liveBuyer(rt);
    const b = await liveBuyer(rt);
    const img = await scene(800, 600, 21);
    expect((await submit((await createJob(rt, a.live, { files_needed: 1 })).id, img)).status).toBe('approved');
    expect((await submit((await createJob(rt, b.live, { files_needed: 1 })).id, img)).status).toBe('approved');
  });
});
