/**
 * `local` scoring provider (D28): deterministic rules on the real bytes, for the embedded runtime.
 * It measures technical quality and the job's measurable constraints; it cannot judge meaning, so
 * relevance is neutral (3) unless the content is empty.
 *
 * RULE TABLE (LOCAL_RULES_VERSION = local-rules/1)
 *
 * instruction_compliance
 *   content type (canonical, D15) not in the job's accepted_formats            → 1
 *   width/height below min_width/min_height, duration outside the job's bounds → 1
 *   otherwise                                                                   → 5
 * relevance
 *   image near-uniform: luma entropy < 0.15 (a flat single colour is 0)        → 1
 *   audio silent: mean volume ≤ −60 dBFS; video without a video stream,
 *   or its middle frame near-uniform                                           → 1
 *   otherwise (meaning not judged offline)                                      → 3
 * quality — image (image-quality.ts measurements on the ≤512 px view)
 *   blur_score ≤ 0.30 → 5 | ≤ 0.50 → 4 | ≤ 0.70 → 3 | ≤ 0.85 → 2 | else → 1
 *   exposure under/overexposed −1; noise_level high −1;
 *   shorter side < 480 px −1 (< 240 px −2); near-uniform → 1
 * quality — audio
 *   base 4; sample_rate < 16 kHz −1 (< 8 kHz −2); duration < 1 s → 1; silent → 1
 * quality — video
 *   shorter side ≥ 1080 → 5 | ≥ 720 → 4 | ≥ 480 → 3 | ≥ 240 → 2 | else 1;
 *   fps < 20 −1; middle frame (ffmpeg, when available) blur_score > 0.85 −2,
 *   underexposed/overexposed −1; no video stream → 1
 * every dimension is clamped to 1..5
 * stars
 *   s = round((2 × quality + relevance + instruction_compliance) / 4), then
 *   s ≤ quality (technical quality bounds the rating), s ≤ 2 when relevance = 1,
 *   s = 1 when instruction_compliance = 1; clamped 1..5.
 * Consequences (tested): a flat single-colour image scores 1 (≤ 2); a sharp, well-exposed
 * image meeting every constraint scores 4–5 (≥ 3); a heavily blurred one scores 1.
 */
import { analyzeImage, type ImageMeasures } from '../media/image-quality';
import { categoryOf, normalizeContentType } from '../media/sniff';
import { clampStar, reasonCodesFromDimensions, type Dimensions, type ScoreResult, type Scorer, type ScoringInput } from './types';

export const LOCAL_RULES_VERSION = 'local-rules/1';
const NEAR_UNIFORM_ENTROPY = 0.15;

const clampDim = (n: number) => Math.max(1, Math.min(5, Math.round(n)));

export function imageQualityScore(q: ImageMeasures): { quality: number; notes: string[]; nearUniform: boolean } {
  const notes: string[] = [];
  const nearUniform = q.entropy < NEAR_UNIFORM_ENTROPY;
  if (nearUniform) {
    notes.push(`the image is nearly a single flat colour (entropy ${q.entropy})`);
    return { quality: 1, notes, nearUniform };
  }
  const b = q.blur_score;
  let quality = b <= 0.3 ? 5 : b <= 0.5 ? 4 : b <= 0.7 ? 3 : b <= 0.85 ? 2 : 1;
  notes.push(b <= 0.5 ? `sharp (blur score ${b})` : b <= 0.7 ? `slightly soft (blur score ${b})` : `blurry (blur score ${b})`);
  if (q.exposure !== 'well_exposed') {
    quality -= 1;
    notes.push(q.exposure);
  } else notes.push('well exposed');
  if (q.noise_level === 'high') {
    quality -= 1;
    notes.push('high noise');
  }
  const short = Math.min(q.width, q.height);
  if (short < 240) {
    quality -= 2;
    notes.push(`very low resolution (${q.width}×${q.height})`);
  } else if (short < 480) {
    quality -= 1;
    notes.push(`low resolution (${q.width}×${q.height})`);
  }
  return { quality: clampDim(quality), notes, nearUniform };
}

export interface LocalScorerOptions {
  /** analyse the middle frame of videos with ffmpeg (default true when ffmpeg exists) */
  videoFrame?: boolean;
}

export class LocalScorer implements Scorer {
  readonly name = 'local' as const;
  constructor(private readonly opts: LocalScorerOptions = {}) {}

  async score({ job, file }: ScoringInput): Promise<ScoreResult> {
    const md = file.metadata;
    const ct = normalizeContentType(file.content_type) ?? file.content_type;
    const category = categoryOf(ct);
    const notes: string[] = [];
    const violations: string[] = [];

    const accepted = new Set(job.accepted_formats.map((f) => normalizeContentType(f) ?? f));
    if (!accepted.has(ct)) violations.push(`format ${ct} is not among the accepted formats`);
    if ((category === 'image' || category === 'video') && md.width && md.height) {
      if (job.min_width && md.width < job.min_width) violations.push(`width ${md.width}px < ${job.min_width}px`);
      if (job.min_height && md.height < job.min_height) violations.push(`height ${md.height}px < ${job.min_height}px`);
    }
    if ((category === 'audio' || category === 'video') && md.duration_seconds !== null && md.duration_seconds !== undefined) {
      if (job.min_duration_seconds && md.duration_seconds < job.min_duration_seconds) violations.push(`duration ${md.duration_seconds}s < ${job.min_duration_seconds}s`);
      if (job.max_duration_seconds && md.duration_seconds > job.max_duration_seconds) violations.push(`duration ${md.duration_seconds}s > ${job.max_duration_seconds}s`);
    }

    let quality = 3;
    let relevance = 3;
    if (category === 'image') {
      const q = file.image_quality ?? (await analyzeImage(requireInput(file), { palette: false }));
      const r = imageQualityScore(q);
      quality = r.quality;
      notes.push(...r.notes);
      if (r.nearUniform) relevance = 1;
    } else if (category === 'audio') {
      const r = await this.audioQuality(file);
      quality = r.quality;
      notes.push(...r.notes);
      if (r.silent) relevance = 1;
    } else if (category === 'video') {
      const r = await this.videoQuality(file);
      quality = r.quality;
      notes.push(...r.notes);
      if (r.empty) relevance = 1;
    } else {
      quality = 1;
      notes.push('unknown media type');
    }

    const dims: Dimensions = {
      relevance: clampDim(relevance),
      quality: clampDim(quality),
      instruction_compliance: violations.length > 0 ? 1 : 5,
    };
    let star = clampStar((2 * dims.quality + dims.relevance + dims.instruction_compliance) / 4);
    star = Math.min(star, dims.quality);
    if (dims.relevance === 1) star = Math.min(star, 2);
    if (dims.instruction_compliance === 1) star = 1;
    star = clampStar(star);

    const parts = [
      `Local rule-based score (${LOCAL_RULES_VERSION}): ${notes.join(', ')}.`,
      violations.length > 0 ? `Job constraints not met: ${violations.join('; ')}.` : 'All measurable job constraints are met.',
      dims.relevance === 3 ? 'Relevance to the description is not judged by the local scorer (neutral 3).' : 'No usable content to match the description.',
    ];
    return {
      ai_star_rating: star,
      dimensions: dims,
      ai_reasoning: parts.join(' '),
      provider: 'local',
      model: LOCAL_RULES_VERSION,
      // D58/D68: the neutral relevance (3) is no judgement, so it is never a reason; a relevance
      // of 1 (no usable content) is one.
      reason_codes:
        star >= (job.min_star_rating ?? 3) ? [] : reasonCodesFromDimensions(dims, job.min_star_rating).filter((c) => c !== 'low_relevance' || dims.relevance !== 3),
    };
  }

  private async audioQuality(file: ScoringInput['file']): Promise<{ quality: number; notes: string[]; silent: boolean }> {
    const md = file.metadata;
    const notes: string[] = [];
    let quality = 4;
    let mean = file.mean_volume_db;
    if (mean === undefined && (file.bytes || file.path)) {
      const { loudness } = await import('../media/frames');
      mean = (await loudness(requireInput(file))).mean_volume_db;
    }
    const silent = mean !== null && mean !== undefined && mean <= -60;
    if (silent) {
      notes.push(`silent audio (mean volume ${mean} dBFS)`);
      return { quality: 1, notes, silent };
    }
    if (md.duration_seconds !== null && md.duration_seconds !== undefined && md.duration_seconds < 1) {
      notes.push(`too short (${md.duration_seconds}s)`);
      return { quality: 1, notes, silent };
    }
    const sr = md.sample_rate ?? null;
    if (sr !== null && sr < 8000) {
      quality -= 2;
      notes.push(`very low sample rate (${sr} Hz)`);
    } else if (sr !== null && sr < 16000) {
      quality -= 1;
      notes.push(`low sample rate (${sr} Hz)`);
    } else if (sr !== null) notes.push(`${sr} Hz`);
    if (md.channels) notes.push(`${md.channels} channel${md.channels > 1 ? 's' : ''}`);
    if (mean !== null && mean !== undefined) notes.push(`mean volume ${mean} dBFS`);
    return { quality, notes, silent };
  }

  private async videoQuality(file: ScoringInput['file']): Promise<{ quality: number; notes: string[]; empty: boolean }> {
    const md = file.metadata;
    const notes: string[] = [];
    if (md.has_video === false || !md.width || !md.height) {
      notes.push('no video stream');
      return { quality: 1, notes, empty: true };
    }
    const short = Math.min(md.width, md.height);
    let quality = short >= 1080 ? 5 : short >= 720 ? 4 : short >= 480 ? 3 : short >= 240 ? 2 : 1;
    notes.push(`${md.width}×${md.height}`);
    if (md.fps && md.fps < 20) {
      quality -= 1;
      notes.push(`low frame rate (${md.fps} fps)`);
    }
    let empty = false;
    const { ffmpegPath } = await import('../media/ffmpeg');
    if ((this.opts.videoFrame ?? true) && ffmpegPath() && (file.bytes || file.path) && md.duration_seconds) {
      const { extractKeyframes } = await import('../media/frames');
      const [frame] = await extractKeyframes(requireInput(file), md.duration_seconds, [0.5], 512);
      if (frame) {
        const q = await analyzeImage(frame.png, { palette: false });
        if (q.entropy < NEAR_UNIFORM_ENTROPY) {
          empty = true;
          quality = 1;
          notes.push('middle frame is a flat single colour');
        } else {
          if (q.blur_score > 0.85) {
            quality -= 2;
            notes.push(`middle frame blurry (blur score ${q.blur_score})`);
          }
          if (q.exposure !== 'well_exposed') {
            quality -= 1;
            notes.push(`middle frame ${q.exposure}`);
          }
        }
      }
    }
    return { quality: clampDim(quality), notes, empty };
  }
}

function requireInput(file: ScoringInput['file']): Buffer | string {
  if (file.bytes) return file.bytes;
  if (file.path) return file.path;
  throw new Error('the local scorer needs the file bytes or a local path');
}
