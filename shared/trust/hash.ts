/**
 * Comparing 64-bit perceptual hashes (D69): pure bit arithmetic, no image decoding, so that the
 * approval and withdrawal paths (upload and override routes) can maintain the near-duplicate
 * index without loading sharp. Hashing itself is in ./phash.
 */
const POP = new Uint8Array(256).map((_, i) => {
  let n = 0;
  for (let b = i; b; b >>= 1) n += b & 1;
  return n;
});

/** Number of differing bits between two 16-hex-character hashes. */
export function hammingDistance(a: string, b: string): number {
  if (!isPerceptualHash(a) || !isPerceptualHash(b)) throw new Error('perceptual hashes are 16 hex characters');
  let d = 0;
  for (let i = 0; i < 16; i += 2) d += POP[parseInt(a.slice(i, i + 2), 16) ^ parseInt(b.slice(i, i + 2), 16)]!;
  return d;
}

export const isPerceptualHash = (h: unknown): h is string => typeof h === 'string' && /^[0-9a-f]{16}$/.test(h);
