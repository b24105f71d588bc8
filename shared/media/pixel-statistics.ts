/**
 * Pixel statistics for the image analysis (image-quality.ts): order statistics (`selectKth`, the
 * k-th smallest value in linear time; `median9`, the median of a 3 × 3 neighbourhood), the
 * dominant-colour palette, and the 4-decimal rounding (`round4`) of the reported measures.
 *
 * Colour palette (`dominantColours`): ≤ 6 dominant colours, as `#rrggbb`, most frequent first.
 * Pixels (sampled on a ≤ 96 × 96 grid) are binned by 4 bits per channel; the 32 most populated
 * bins seed a deterministic k-means (8 iterations) in RGB; clusters closer than 40 (Euclidean
 * RGB) merge; clusters under 2 % of the pixels are dropped.
 */
export interface PaletteColour {
  hex: string;
  /** share of the sampled pixels, 0..1 */
  share: number;
}

export const round4 = (n: number) => Math.round(n * 10000) / 10000;

/**
 * The k-th smallest value of `a` (0-based), as `a.sort()[k]` would give; reorders `a`. Hoare's
 * selection with a median-of-three pivot: linear on average.
 */
export function selectKth(a: Float32Array, k: number): number {
  let lo = 0;
  let hi = a.length - 1;
  while (hi > lo) {
    const mid = (lo + hi) >>> 1;
    // median of three to the middle
    if (a[mid]! < a[lo]!) swap(a, mid, lo);
    if (a[hi]! < a[lo]!) swap(a, hi, lo);
    if (a[hi]! < a[mid]!) swap(a, hi, mid);
    const pivot = a[mid]!;
    let i = lo;
    let j = hi;
    while (i <= j) {
      while (a[i]! < pivot) i++;
      while (a[j]! > pivot) j--;
      if (i <= j) {
        swap(a, i, j);
        i++;
        j--;
      }
    }
    if (k <= j) hi = j;
    else if (k >= i) lo = i;
    else return a[k]!;
  }
  return a[k]!;
}

function swap(a: Float32Array, i: number, j: number): void {
  const t = a[i]!;
  a[i] = a[j]!;
  a[j] = t;
}

/** Median of 9 values by a fixed exchange network (Paeth / Devillard opt_med9). */
export function median9(p0: number, p1: number, p2: number, p3: number, p4: number, p5: number, p6: number, p7: number, p8: number): number {
  let t: number;
  if (p1 > p2) { t = p1; p1 = p2; p2 = t; }
  if (p4 > p5) { t = p4; p4 = p5; p5 = t; }
  if (p7 > p8) { t = p7; p7 = p8; p8 = t; }
  if (p0 > p1) { t = p0; p0 = p1; p1 = t; }
  if (p3 > p4) { t = p3; p3 = p4; p4 = t; }
  if (p6 > p7) { t = p6; p6 = p7; p7 = t; }
  if (p1 > p2) { t = p1; p1 = p2; p2 = t; }
  if (p4 > p5) { t = p4; p4 = p5; p5 = t; }
  if (p7 > p8) { t = p7; p7 = p8; p8 = t; }
  if (p0 > p3) p3 = p0;
  if (p5 > p8) p5 = p8;
  if (p4 > p7) { t = p4; p4 = p7; p7 = t; }
  if (p3 > p6) p6 = p3;
  if (p1 > p4) p4 = p1;
  if (p2 > p5) p2 = p5;
  if (p4 > p7) p4 = p7;
  if (p4 > p2) { t = p4; p4 = p2; p2 = t; }
  if (p6 > p4) p4 = p6;
  if (p4 > p2) p4 = p2;
  return p4;
}

const hex = (r: number, g: number, b: number) =>
  `#${[r, g, b].map((v) => Math.max(0, Math.min(255, Math.round(v))).toString(16).padStart(2, '0')).join('')}`;

/** Deterministic dominant colours (see the header). */
export function dominantColours(data: Uint8Array, w: number, h: number, ch: number, max = 6): PaletteColour[] {
  const grid = 96;
  const sx = Math.max(1, Math.floor(w / grid));
  const sy = Math.max(1, Math.floor(h / grid));
  const px: number[] = [];
  for (let r = 0; r < h; r += sy) {
    for (let c = 0; c < w; c += sx) {
      const p = (r * w + c) * ch;
      const R = data[p]!;
      px.push(R, ch >= 3 ? data[p + 1]! : R, ch >= 3 ? data[p + 2]! : R);
    }
  }
  const count = px.length / 3;
  if (count === 0) return [];
  // 4-bit bins → seeds
  const bins = new Map<number, { n: number; r: number; g: number; b: number }>();
  for (let i = 0; i < px.length; i += 3) {
    const key = ((px[i]! >> 4) << 8) | ((px[i + 1]! >> 4) << 4) | (px[i + 2]! >> 4);
    const e = bins.get(key) ?? { n: 0, r: 0, g: 0, b: 0 };
    e.n++;
    e.r += px[i]!;
    e.g += px[i + 1]!;
    e.b += px[i + 2]!;
    bins.set(key, e);
  }
  let centres = [...bins.entries()]
    .sort((a, b) => b[1].n - a[1].n || a[0] - b[0])
    .slice(0, 32)
    .map(([, e]) => [e.r / e.n, e.g / e.n, e.b / e.n] as [number, number, number]);
  const assign = new Int32Array(count);
  for (let iter = 0; iter < 8; iter++) {
    const acc = centres.map(() => [0, 0, 0, 0]);
    for (let i = 0; i < count; i++) {
      const r = px[i * 3]!;
      const g = px[i * 3 + 1]!;
      const b = px[i * 3 + 2]!;
      let best = 0;
      let bestD = Infinity;
      for (let k = 0; k < centres.length; k++) {
        const c = centres[k]!;
        const d = (c[0] - r) ** 2 + (c[1] - g) ** 2 + (c[2] - b) ** 2;
        if (d < bestD) {
          bestD = d;
          best = k;
        }
      }
      assign[i] = best;
      const a = acc[best]!;
      a[0]! += r;
      a[1]! += g;
      a[2]! += b;
      a[3]!++;
    }
    centres = centres.map((c, k) => {
      const a = acc[k]!;
      return a[3]! > 0 ? [a[0]! / a[3]!, a[1]! / a[3]!, a[2]! / a[3]!] : c;
    });
  }
  const sizes = new Array<number>(centres.length).fill(0);
  for (let i = 0; i < count; i++) sizes[assign[i]!]!++;
  // merge near clusters, biggest first
  const order = centres.map((c, k) => ({ c, n: sizes[k]! })).filter((x) => x.n > 0).sort((a, b) => b.n - a.n);
  const merged: { c: [number, number, number]; n: number }[] = [];
  for (const x of order) {
    const near = merged.find((m) => Math.hypot(m.c[0] - x.c[0], m.c[1] - x.c[1], m.c[2] - x.c[2]) < 40);
    if (near) {
      const t = near.n + x.n;
      near.c = [(near.c[0] * near.n + x.c[0] * x.n) / t, (near.c[1] * near.n + x.c[1] * x.n) / t, (near.c[2] * near.n + x.c[2] * x.n) / t];
      near.n = t;
    } else merged.push({ c: [...x.c], n: x.n });
  }
  return merged
    .sort((a, b) => b.n - a.n)
    .filter((m) => m.n / count >= 0.02)
    .slice(0, max)
    .map((m) => ({ hex: hex(m.c[0], m.c[1], m.c[2]), share: round4(m.n / count) }));
}
