/**
 * The near-duplicate check (shared/trust/neardup.ts) against DynamoDB Local with 1,000, 10,000 and
 * 100,000 approved-image hashes stored for one tenant: latency of `findNearDuplicate`, items read
 * (buckets requested and found), candidates compared, and recall on near-copies (hashes 1..9 bits
 * away from a stored one) next to misses on fresh random hashes. Plus the cost of hashing an image.
 * The buckets are loaded with BatchWriteItem exactly as the approval transaction would leave them
 * (one attribute `h#<file_id>` per image).
 */
import { randomBytes } from 'node:crypto';
import { BatchWriteCommand } from '@aws-sdk/lib-dynamodb';

const SIZES = [1_000, 10_000, 100_000];
const CHECKS = 200;
const CONCURRENCY = 4;

const randomHash = () => randomBytes(8).toString('hex');
function flip(hash: string, n: number): string {
  let v = BigInt(`0x${hash}`);
  const bits = new Set<number>();
  while (bits.size < n) bits.add(Math.floor(Math.random() * 64));
  for (const b of bits) v ^= 1n << BigInt(b);
  return v.toString(16).padStart(16, '0');
}
const pct = (xs: number[], p: number) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.ceil(p * s.length) - 1)]!;
};

export const name = 'Near-duplicate check (perceptual-hash band index)';

export async function run(): Promise<string> {
  const { startRuntime } = await import('../local/runtime');
  const rt = await startRuntime({ wafRateLimits: false, stageThrottle: false, inMemory: true, port: 0, enableScheduler: false, enablePollers: false, enableStreams: false, logLevel: 'error', cursorSecret: 'bench' });
  try {
    const { db, tableName } = await import('../shared/db/client');
    const { indexKeysOf, findNearDuplicate, BUCKETS_PER_CHECK, NEAR_DUPLICATE_MAX_DISTANCE } = await import('../shared/trust/neardup');
    const { perceptualHash } = await import('../shared/trust/phash');
    const sharp = (await import('sharp')).default;

    const rows: string[] = [];
    for (const size of SIZES) {
      const org = `org_BENCH${size}`;
      const stored = Array.from({ length: size }, (_, i) => ({ fileId: `file_${String(i).padStart(8, '0')}`, hash: randomHash() }));
      // Build the buckets in memory, then write each once.
      const buckets = new Map<string, Record<string, unknown>>();
      for (const s of stored) {
        for (const k of indexKeysOf(org, 'live', s.hash)) {
          const id = `${k.PK}|${k.SK}`;
          const item = buckets.get(id) ?? { ...k, entity: 'perceptual_hash_bucket' };
          item[`h#${s.fileId}`] = s.hash;
          buckets.set(id, item);
        }
      }
      const items = [...buckets.values()];
      const t0 = performance.now();
      for (let i = 0; i < items.length; i += 25 * CONCURRENCY) {
        await Promise.all(
          Array.from({ length: CONCURRENCY }, async (_, c) => {
            let batch = items.slice(i + c * 25, i + (c + 1) * 25).map((Item) => ({ PutRequest: { Item } }));
            while (batch.length) {
              const out = await db().send(new BatchWriteCommand({ RequestItems: { [tableName()]: batch } }));
              batch = (out.UnprocessedItems?.[tableName()] as typeof batch | undefined) ?? [];
            }
          }),
        );
      }
      const loadSeconds = (performance.now() - t0) / 1000;

      const lat: number[] = [];
      const itemsRead: number[] = [];
      const candidates: number[] = [];
      let found = 0;
      let falseHits = 0;
      let next = 0;
      await Promise.all(
        Array.from({ length: CONCURRENCY }, async () => {
          for (let i = next++; i < CHECKS; i = next++) {
            const near = i % 2 === 0;
            const q = near ? flip(stored[Math.floor(Math.random() * size)]!.hash, 1 + (i % NEAR_DUPLICATE_MAX_DISTANCE)) : randomHash();
            const s = performance.now();
            const r = await findNearDuplicate(org, 'live', q);
            lat.push(performance.now() - s);
            itemsRead.push(r.itemsRead);
            candidates.push(r.candidates);
            if (near && r.match) found++;
            if (!near && r.match) falseHits++;
          }
        }),
      );
      const mean = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / xs.length;
      rows.push(
        `| ${size.toLocaleString('en-US')} | ${items.length.toLocaleString('en-US')} (${loadSeconds.toFixed(0)} s) | ${pct(lat, 0.5).toFixed(1)} | ${pct(lat, 0.99).toFixed(1)} | ${BUCKETS_PER_CHECK} | ${mean(itemsRead).toFixed(1)} | ${mean(candidates).toFixed(1)} | ${found}/${CHECKS / 2} | ${falseHits}/${CHECKS / 2} |`,
      );
    }

    // The other half of a check's cost: hashing the new image.
    const img = await sharp({ create: { width: 1600, height: 1200, channels: 3, background: { r: 90, g: 120, b: 160 } } })
      .composite([{ input: await sharp(randomBytes(400 * 300 * 3), { raw: { width: 400, height: 300, channels: 3 } }).resize(1600, 1200).png().toBuffer() }])
      .jpeg({ quality: 85 })
      .toBuffer();
    const hashLat: number[] = [];
    for (let i = 0; i < 30; i++) {
      const s = performance.now();
      await perceptualHash(img);
      hashLat.push(performance.now() - s);
    }

    return [
      `One tenant with N approved images; ${CHECKS} checks per size at concurrency ${CONCURRENCY}: half are near-copies of a stored image`,
      `(1 to ${NEAR_DUPLICATE_MAX_DISTANCE} of 64 bits flipped, all must be found), half fresh random hashes (none should match). A check is one`,
      `BatchGetItem of ${BUCKETS_PER_CHECK} bucket keys (consistent reads) whatever N is; "items read" counts the buckets that exist, "candidates" the`,
      'stored hashes compared on all 64 bits. Latency in ms, DynamoDB Local on this machine.',
      '',
      '| stored hashes | bucket items (load time) | p50 | p99 | keys requested | items read (mean) | candidates (mean) | near-copies found | false hits |',
      '|---|---|---|---|---|---|---|---|---|',
      ...rows,
      '',
      `Hashing the new image (a 1600×1200 JPEG: decode, greyscale 32×32, DCT): p50 ${pct(hashLat, 0.5).toFixed(1)} ms, p99 ${pct(hashLat, 0.99).toFixed(1)} ms.`,
    ].join('\n');
  } finally {
    await rt.stop();
  }
}
