/**
 * Image quality from the real pixels, with sharp (D55 encodings).
 *
 * One decode: the image is auto-oriented, flattened on white (alpha), shrunk to fit 512 × 512
 * (never enlarged) and read as raw RGB. Everything below is computed in JS on that buffer
 * (≤ 262 144 pixels), so the cost is the decode plus ~10–40 ms.
 *
 * - Luma Y = 0.299 R + 0.587 G + 0.114 B (0..255).
 * - Sharpness: variance of the 4-neighbour Laplacian [0,1,0; 1,-4,1; 0,1,0] of Y (interior
 *   pixels, no clamping; the offline notes' sharp `convolve(offset:128)` recipe gives the same
 *   order of magnitude but clips). `blur_score` = 1 / (1 + variance / 100): strictly decreasing
 *   in the variance, 0..1, higher = blurrier (D55); 0.5 at variance 100, the usual "blurry below
 *   100" cut-off; a crisp photo (~750) ≈ 0.12; a Gaussian-blurred one (~3) ≈ 0.97; a flat
 *   single-colour image = 1.
 * - Exposure from the Y histogram: `underexposed` when mean Y < 60 or ≥ 50 % of pixels ≤ 16;
 *   `overexposed` when mean Y > 195 or ≥ 50 % of pixels ≥ 240; else `well_exposed`.
 * - Noise: residual r = Y − median3×3(Y); sigma = 1.4826 × median(|r|) (robust MAD estimate,
 *   so a few edges do not count as noise). `noise_level`: sigma < 2 → low, < 6 → medium, else
 *   high. Measured at the 512-px scale, i.e. the noise a viewer sees on a screen-sized view.
 * - Detail: `entropy` = Shannon entropy of the 256-bin Y histogram / 8 (0..1);
 *   `edge_density` = share of pixels whose gradient magnitude |∂x|+|∂y| exceeds 24.
 *   A flat single-colour image has entropy 0 and edge_density 0.
 * - Colour palette: ≤ 6 dominant colours, as `#rrggbb`, most frequent first. Pixels (sampled on
 *   a ≤ 96 × 96 grid) are binned by 4 bits per channel; the 32 most populated bins seed a
 *   deterministic k-means (8 iterations) in RGB; clusters closer than 40 (Euclidean RGB) merge;
 *   clusters under 2 % of the pixels are dropped.
 */
import type { Sharp } from 'sharp';
import { imageAnalysisOffload } from './offload';

export type Exposure = 'underexposed' | 'well_exposed' | 'overexposed';
export type NoiseLevel = 'low' | 'medium' | 'high';

export interface PaletteColour {
  hex: string;
  /** share of the sampled pixels, 0..1 */
  share: number;
}

export interface ImageQuality {
  /** stored bytes' dimensions (D55) */
  width: number;
  height: number;
  /** dimensions of the analysed (≤ 512 px) view */
  analysed_width: number;
  analysed_height: number;
  laplacian_variance: number;
  blur_score: number;
  mean_luminance: number;
  dark_fraction: number;
  bright_fraction: number;
  exposure: Exposure;
  noise_sigma: number;
  noise_level: NoiseLevel;
  entropy: number;
  edge_density: number;
  palette: PaletteColour[];
  color_palette: string[];
  elapsed_ms: number;
}

/** The measurements without the colour palette (what the local scorer rates: `analyzeImage(…, { palette: false })`). */
export type ImageMeasures = Omit<ImageQuality, 'palette' | 'color_palette'>;

export const ANALYSIS_SIZE = 512;

export function blurScoreFromVariance(variance: number): number {
  if (!(variance > 0)) return 1;
  return round4(1 / (1 + variance / 100));
}

export function exposureFrom(mean: number, dark: number, bright: number): Exposure {
  if (mean < 60 || dark >= 0.5) return 'underexposed';
  if (mean > 195 || bright >= 0.5) return 'overexposed';
  return 'well_exposed';
}

export function noiseLevelFrom(sigma: number): NoiseLevel {
  return sigma < 2 ? 'low' : sigma < 6 ? 'medium' : 'high';
}

const round4 = (n: number) => Math.round(n * 10000) / 10000;

async function loadSharp(): Promise<(input?: Buffer | string, options?: import('sharp').SharpOptions) => Sharp> {
  const mod = (await import('sharp')) as unknown as { default?: typeof import('sharp') } & typeof import('sharp');
  return (mod.default ?? mod) as unknown as (input?: Buffer | string, options?: import('sharp').SharpOptions) => Sharp;
}

/**
 * Analyse an image (bytes or path). Throws when sharp cannot decode it. `palette: false` skips the
 * dominant colours (a k-means pass costing about as much as the rest of the analysis) for callers
 * that only rate the image.
 */
export async function analyzeImage(input: Buffer | string): Promise<ImageQuality>;
export async function analyzeImage(input: Buffer | string, opts: { palette: false }): Promise<ImageMeasures>;
export async function analyzeImage(input: Buffer | string, opts: { palette?: boolean } = {}): Promise<ImageQuality | ImageMeasures> {
  const offload = imageAnalysisOffload(); // the local runtime's model workers (offload.ts)
  if (offload) return offload.analyzeImage(input, opts);
  const t0 = performance.now();
  const sharp = await loadSharp();
  const base = sharp(input, { failOn: 'none' });
  const meta = await base.metadata();
  const { data, info } = await sharp(input, { failOn: 'none' })
    .rotate()
    .flatten({ background: '#ffffff' })
    .resize(ANALYSIS_SIZE, ANALYSIS_SIZE, { fit: 'inside', withoutEnlargement: true })
    .removeAlpha()
    .toColourspace('srgb')
    .raw()
    .toBuffer({ resolveWithObject: true });
  const w = info.width;
  const h = info.height;
  const ch = info.channels;
  const n = w * h;

  // luma + histogram
  const y = new Float32Array(n);
  const hist = new Uint32Array(256);
  let sum = 0;
  for (let i = 0, p = 0; i < n; i++, p += ch) {
    const r = data[p]!;
    const g = ch >= 3 ? data[p + 1]! : r;
    const b = ch >= 3 ? data[p + 2]! : r;
    const v = 0.299 * r + 0.587 * g + 0.114 * b;
    y[i] = v;
    hist[Math.min(255, Math.round(v))]!++;
    sum += v;
  }
  const mean = sum / n;
  let dark = 0;
  let bright = 0;
  let entropy = 0;
  for (let v = 0; v < 256; v++) {
    const c = hist[v]!;
    if (v <= 16) dark += c;
    if (v >= 240) bright += c;
    if (c > 0) {
      const p = c / n;
      entropy -= p * Math.log2(p);
    }
  }

  // Laplacian variance, gradient density, median residual (interior pixels)
  let lapSum = 0;
  let lapSq = 0;
  let lapN = 0;
  let edges = 0;
  const step = n > 120_000 ? 2 : 1; // residual sampled on every 2nd pixel of large views
  const residual = new Float32Array(Math.ceil(((w - 2) * (h - 2)) / step) + 1);
  let nRes = 0;
  for (let r = 1; r < h - 1; r++) {
    for (let c = 1; c < w - 1; c++) {
      const i = r * w + c;
      const center = y[i]!;
      const up = y[i - w]!;
      const down = y[i + w]!;
      const left = y[i - 1]!;
      const right = y[i + 1]!;
      const lap = up + down + left + right - 4 * center;
      lapSum += lap;
      lapSq += lap * lap;
      lapN++;
      if (Math.abs(right - left) / 2 + Math.abs(down - up) / 2 > 24) edges++;
      if ((r + c) % step === 0) {
        const med = median9(y[i - w - 1]!, up, y[i - w + 1]!, left, center, right, y[i + w - 1]!, down, y[i + w + 1]!);
        residual[nRes++] = Math.abs(center - med);
      }
    }
  }
  const lapVar = lapN > 0 ? lapSq / lapN - (lapSum / lapN) ** 2 : 0;
  let noiseSigma = 0;
  if (nRes > 0) {
    const res = residual.subarray(0, nRes);
    // The element a full sort would put in the middle, found in linear time (the sort was a third
    // of this function's cost).
    noiseSigma = 1.4826 * selectKth(res, Math.floor(nRes / 2));
    // The MAD is 0 when more than half the residuals are 0 (flat areas, clean graphics): fall back
    // to the RMS of the residual, which still rises with real noise (summed in ascending order).
    if (noiseSigma === 0) {
      let sq = 0;
      for (const v of res.sort()) sq += v * v;
      noiseSigma = Math.sqrt(sq / nRes) * 0.5;
    }
  }

  const measures = {
    width: meta.width ?? w,
    height: meta.pageHeight ?? meta.height ?? h,
    analysed_width: w,
    analysed_height: h,
    laplacian_variance: Math.round(lapVar * 100) / 100,
    blur_score: blurScoreFromVariance(lapVar),
    mean_luminance: Math.round(mean * 100) / 100,
    dark_fraction: round4(dark / n),
    bright_fraction: round4(bright / n),
    exposure: exposureFrom(mean, dark / n, bright / n),
    noise_sigma: Math.round(noiseSigma * 100) / 100,
    noise_level: noiseLevelFrom(noiseSigma),
    entropy: round4(entropy / 8),
    edge_density: round4(lapN > 0 ? edges / lapN : 0),
  };
  if (opts.palette === false) return { ...measures, elapsed_ms: Math.round(performance.now() - t0) };
  const palette = dominantColours(data, w, h, ch);
  return { ...measures, palette, color_palette: palette.map((p) => p.hex), elapsed_ms: Math.round(performance.now() - t0) };
}

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
function median9(p0: number, p1: number, p2: number, p3: number, p4: number, p5: number, p6: number, p7: number, p8: number): number {
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
