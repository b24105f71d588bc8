/**
 * A 64-bit perceptual hash of an image (D69): the classic DCT hash ("pHash").
 *
 * The image is decoded with sharp (EXIF orientation applied), flattened onto white, reduced to a
 * 32×32 greyscale thumbnail, transformed with a 2-D DCT-II, and the 8×8 block of the lowest
 * frequencies is kept. Each of those 64 coefficients becomes one bit: 1 when it is above the median
 * of the 63 non-DC coefficients. The hash depends on the coarse structure of the picture only, so a
 * re-encoded, recompressed, resized or lightly brightened copy keeps (nearly) the same bits, while a
 * different scene flips about half of them. Two hashes are compared by their Hamming distance.
 */
import type { default as Sharp } from 'sharp';

/** sharp (a native addon) is loaded by the first hash, not when the scoring consumer loads. */
let loaded: Promise<typeof Sharp> | null = null;
const loadSharp = () => (loaded ??= import('sharp').then((m) => ((m as { default?: typeof Sharp }).default ?? (m as unknown as typeof Sharp))));

const N = 32;
const K = 8;

/** cos((2x+1)uπ / 2N) for u < K, x < N, computed once. */
const COS: Float64Array[] = Array.from({ length: K }, (_, u) => {
  const row = new Float64Array(N);
  for (let x = 0; x < N; x++) row[x] = Math.cos(((2 * x + 1) * u * Math.PI) / (2 * N));
  return row;
});

/** The 64-bit hash of the image bytes as 16 lowercase hex characters. */
export async function perceptualHash(input: Buffer): Promise<string> {
  const sharp = await loadSharp();
  const px = await sharp(input, { failOn: 'none' })
    .rotate()
    .flatten({ background: '#ffffff' })
    .greyscale()
    .resize(N, N, { fit: 'fill', kernel: 'lanczos3' })
    .raw()
    .toBuffer();
  return hashOfPixels(px);
}

/** The hash of a 32×32 8-bit greyscale raster (row-major). */
export function hashOfPixels(px: Uint8Array): string {
  if (px.length !== N * N) throw new Error(`expected ${N * N} greyscale pixels, got ${px.length}`);
  // Separable DCT: rows first (only the K lowest frequencies), then columns.
  const rows = new Float64Array(N * K);
  for (let y = 0; y < N; y++) {
    for (let u = 0; u < K; u++) {
      let s = 0;
      const c = COS[u]!;
      for (let x = 0; x < N; x++) s += px[y * N + x]! * c[x]!;
      rows[y * K + u] = s;
    }
  }
  const coeffs = new Float64Array(K * K);
  for (let v = 0; v < K; v++) {
    const c = COS[v]!;
    for (let u = 0; u < K; u++) {
      let s = 0;
      for (let y = 0; y < N; y++) s += rows[y * K + u]! * c[y]!;
      coeffs[v * K + u] = s;
    }
  }
  const median = medianOf(Array.from(coeffs).slice(1));
  let hi = 0;
  let lo = 0;
  for (let i = 0; i < 64; i++) {
    const bit = coeffs[i]! > median ? 1 : 0;
    if (i < 32) hi = (hi << 1) | bit;
    else lo = (lo << 1) | bit;
  }
  return (hi >>> 0).toString(16).padStart(8, '0') + (lo >>> 0).toString(16).padStart(8, '0');
}

function medianOf(values: number[]): number {
  const s = values.sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
}

export { hammingDistance, isPerceptualHash } from './hash';
