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
 * - Colour palette: ≤ 6 dominant colours, as `#rrggbb`, most frequent first (`dominantColours`,
 *   pixel-statistics.ts, where the method is described); skipped with `palette: false`.
 * The order statistics the noise estimate uses (`median9`, `selectKth`) are in pixel-statistics.ts.
 */
import type { Sharp } from 'sharp';
import { imageAnalysisOffload } from './offload';
import { dominantColours, median9, round4, selectKth, type PaletteColour } from './pixel-statistics';

export type Exposure = 'underexposed' | 'well_exposed' | 'overexposed';
export type NoiseLevel = 'low' | 'medium' | 'high';

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
