/**
 * Pure rules that turn model outputs and measurements into the spec's annotation fields (D51
 * shape, D55 encodings). No I/O here; every rule is unit-tested in test/unit/annotation*.test.ts.
 *
 * Boxes are normalised to the auto-oriented view ([x, y, w, h], each 0..1 of the image as a
 * viewer sees it); width/height fields elsewhere stay the stored bytes' (D55).
 *
 * - position (D55): the box centre's cell in a 3 × 3 grid of equal thirds → top-left, top,
 *   top-right, left, center, right, bottom-left, bottom, bottom-right.
 * - approximate_coverage (D55): box area / image area, clamped 0..1, 4 decimals.
 * - composition (a string from measurable layout; null when nothing was detected): subjects are
 *   the detected objects and faces; the main subject is the one with the largest
 *   coverage × confidence. Its centre (cx, cy) decides, in this order:
 *     coverage ≥ 0.5 → "close-up: <label> fills N% of the frame";
 *     within 0.1 of the centre → "centered subject: <label>";
 *     within 0.1 of a rule-of-thirds intersection (x, y ∈ {1/3, 2/3}) → "rule of thirds: <label>
 *       at the <top-left|…> intersection";
 *     else "off-center subject: <label> at <position>".
 *   With 3 or more subjects the string gains "; N subjects". Symmetry or leading lines are not
 *   claimed: nothing here measures them.
 * - scene (no installed package ships a scene classifier, offline-media.md): inferred from COCO
 *   objects. Each label votes for a setting with a weight (SCENE_VOTES: e.g. oven → kitchen,
 *   car → street, bed → bedroom; chair/potted plant weak indoor votes); votes are
 *   confidence × weight. The best setting wins; `indoor` is that setting's; confidence =
 *   0.8 × (max confidence among its supporting detections) × (its share of all votes), so one
 *   weak or contested detection gives a low number and the cap 0.8 says "inferred from objects,
 *   not a scene model". No voting object → scene null (reason in `unavailable.scene`).
 * - nsfw_score: P(porn) + P(hentai) + 0.5 × P(sexy) from nsfwjs, clamped 0..1. "Sexy" is
 *   nsfwjs's suggestive-not-explicit class, so it counts half: a suggestive image alone stays
 *   ≤ 0.5, explicit content reaches 1. The five class probabilities are kept in
 *   `safety.nsfw_classes` for buyers who want another cut.
 * - pii_detected: true when the OCR text holds an e-mail address, a phone number (≥ 9 digits
 *   with international/grouped formatting), a payment-card number (13–19 digits passing Luhn) or
 *   an IBAN (mod-97 check), OR when a face is detected (an identifiable person is personal data).
 *   `pii_types` lists what was found. null when neither OCR nor face detection ran.
 * - video scene segments: consecutive keyframes whose colour histograms (8 × 8 × 8 RGB bins,
 *   normalised) differ by the Hellinger distance √(1 − Σ√(p·q)) ≥ 0.5 start a new segment.
 *   The cut lies somewhere between the two keyframes; it is placed midway. The first segment
 *   starts at 0, the last ends at the duration. The resolution is the keyframe spacing (25 % of
 *   the duration with the default 3 keyframes): a cut and a cut back between two keyframes is
 *   not seen.
 */

export type Position = 'top-left' | 'top' | 'top-right' | 'left' | 'center' | 'right' | 'bottom-left' | 'bottom' | 'bottom-right';
export const POSITIONS: readonly Position[] = ['top-left', 'top', 'top-right', 'left', 'center', 'right', 'bottom-left', 'bottom', 'bottom-right'];

/** A detection with a normalised box [x, y, w, h] (0..1 of the oriented image). */
export interface Detection {
  label: string;
  confidence: number;
  box: [number, number, number, number];
}

export interface AnnotatedObject {
  label: string;
  confidence: number;
  position: Position;
  approximate_coverage: number;
  /**
   * D73: the detection box in pixels of the upright image (EXIF orientation applied),
   * `[x, y, width, height]` from the top-left corner, clipped to the image, 2 decimals (the COCO
   * `bbox`). Null when the model that found the object gives no box (`unavailable['objects.bbox']`).
   */
  bbox: [number, number, number, number] | null;
}

export interface Scene {
  setting: string;
  indoor: boolean;
  confidence: number;
}

export const round4 = (n: number) => Math.round(n * 10000) / 10000;
export const clamp01 = (n: number) => (Number.isFinite(n) ? Math.min(1, Math.max(0, n)) : 0);

const centre = (b: Detection['box']) => [b[0] + b[2] / 2, b[1] + b[3] / 2] as const;

/** D55 position: the 3 × 3 cell of the box centre. */
export function positionOf(box: Detection['box']): Position {
  const [cx, cy] = centre(box);
  const col = cx < 1 / 3 ? 0 : cx < 2 / 3 ? 1 : 2;
  const row = cy < 1 / 3 ? 0 : cy < 2 / 3 ? 1 : 2;
  return POSITIONS[row * 3 + col]!;
}

/** D55 approximate_coverage: box area / image area, 0..1. */
export function coverageOf(box: Detection['box']): number {
  const w = clamp01(Math.min(box[0] + box[2], 1) - Math.max(box[0], 0));
  const h = clamp01(Math.min(box[1] + box[3], 1) - Math.max(box[1], 0));
  return round4(clamp01(w * h));
}

/** D73: a normalised box → `[x, y, width, height]` in pixels of a `width` × `height` image, clipped. */
export function pixelBox(box: Detection['box'], width: number, height: number): [number, number, number, number] {
  const x0 = clamp01(box[0]);
  const y0 = clamp01(box[1]);
  const x1 = clamp01(box[0] + box[2]);
  const y1 = clamp01(box[1] + box[3]);
  const r2 = (n: number) => Math.round(n * 100) / 100;
  return [r2(x0 * width), r2(y0 * height), r2((x1 - x0) * width), r2((y1 - y0) * height)];
}

/** `view`: the full size of the upright image the box is normalised to, for `bbox` in pixels. */
export function toAnnotatedObject(d: Detection, view: { width: number; height: number } | null = null): AnnotatedObject {
  return {
    label: d.label,
    confidence: round4(clamp01(d.confidence)),
    position: positionOf(d.box),
    approximate_coverage: coverageOf(d.box),
    bbox: view ? pixelBox(d.box, view.width, view.height) : null,
  };
}

/** Composition string (rule in the header); null when there is no subject. */
export function compositionOf(subjects: readonly Detection[]): string | null {
  if (subjects.length === 0) return null;
  const main = [...subjects].sort((a, b) => coverageOf(b.box) * b.confidence - coverageOf(a.box) * a.confidence)[0]!;
  const [cx, cy] = centre(main.box);
  const cov = coverageOf(main.box);
  let s: string;
  if (cov >= 0.5) s = `close-up: ${main.label} fills ${Math.round(cov * 100)}% of the frame`;
  else if (Math.hypot(cx - 0.5, cy - 0.5) <= 0.1) s = `centered subject: ${main.label}`;
  else {
    const thirds = [1 / 3, 2 / 3];
    let best: { d: number; x: number; y: number } | null = null;
    for (const x of thirds) for (const y of thirds) {
      const d = Math.hypot(cx - x, cy - y);
      if (!best || d < best.d) best = { d, x, y };
    }
    if (best && best.d <= 0.1) s = `rule of thirds: ${main.label} at the ${best.y < 0.5 ? 'top' : 'bottom'}-${best.x < 0.5 ? 'left' : 'right'} intersection`;
    else s = `off-center subject: ${main.label} at ${positionOf(main.box)}`;
  }
  return subjects.length >= 3 ? `${s}; ${subjects.length} subjects` : s;
}

/** COCO label → [setting, indoor, weight]. Labels not listed do not vote (person, dog, cat, …). */
export const SCENE_VOTES: Record<string, [string, boolean, number]> = {
  oven: ['kitchen', true, 1], microwave: ['kitchen', true, 1], refrigerator: ['kitchen', true, 1], sink: ['kitchen', true, 0.6], toaster: ['kitchen', true, 1],
  couch: ['living room', true, 1], tv: ['living room', true, 0.8], remote: ['living room', true, 0.6],
  bed: ['bedroom', true, 1],
  toilet: ['bathroom', true, 1], 'hair drier': ['bathroom', true, 0.8], toothbrush: ['bathroom', true, 0.6],
  laptop: ['office', true, 0.8], keyboard: ['office', true, 0.8], mouse: ['office', true, 0.6], book: ['office', true, 0.4],
  'dining table': ['dining room', true, 0.8], 'wine glass': ['dining room', true, 0.5], fork: ['dining room', true, 0.4], knife: ['dining room', true, 0.4], spoon: ['dining room', true, 0.4], bowl: ['dining room', true, 0.4], cup: ['dining room', true, 0.3], pizza: ['dining room', true, 0.4], cake: ['dining room', true, 0.4], sandwich: ['dining room', true, 0.4],
  chair: ['indoor room', true, 0.4], 'potted plant': ['indoor room', true, 0.3], clock: ['indoor room', true, 0.3], vase: ['indoor room', true, 0.3],
  car: ['street', false, 1], bus: ['street', false, 1], truck: ['street', false, 1], motorcycle: ['street', false, 0.8], bicycle: ['street', false, 0.6], 'traffic light': ['street', false, 1], 'fire hydrant': ['street', false, 1], 'stop sign': ['street', false, 1], 'parking meter': ['street', false, 1],
  train: ['railway', false, 1], airplane: ['airport', false, 1], boat: ['waterfront', false, 1],
  horse: ['countryside', false, 1], sheep: ['countryside', false, 1], cow: ['countryside', false, 1],
  elephant: ['wildlife', false, 1], bear: ['wildlife', false, 1], zebra: ['wildlife', false, 1], giraffe: ['wildlife', false, 1], bird: ['outdoors', false, 0.4],
  bench: ['park', false, 0.5], kite: ['park', false, 0.8], frisbee: ['park', false, 0.8],
  'sports ball': ['sports field', false, 0.6], 'baseball bat': ['sports field', false, 0.8], 'baseball glove': ['sports field', false, 0.8], 'tennis racket': ['sports field', false, 0.8], skateboard: ['street', false, 0.5],
  skis: ['snow', false, 1], snowboard: ['snow', false, 1], surfboard: ['beach', false, 1],
};

/** Scene inferred from COCO objects (rule in the header); null when no object votes. */
export function sceneFromObjects(objects: readonly Detection[]): Scene | null {
  const votes = new Map<string, { v: number; indoor: boolean; maxConf: number }>();
  let total = 0;
  for (const o of objects) {
    const rule = SCENE_VOTES[o.label];
    if (!rule) continue;
    const [setting, indoor, weight] = rule;
    const v = o.confidence * weight;
    total += v;
    const e = votes.get(setting) ?? { v: 0, indoor, maxConf: 0 };
    e.v += v;
    e.maxConf = Math.max(e.maxConf, o.confidence);
    votes.set(setting, e);
  }
  if (total <= 0) return null;
  const [setting, best] = [...votes.entries()].sort((a, b) => b[1].v - a[1].v || a[0].localeCompare(b[0]))[0]!;
  return { setting, indoor: best.indoor, confidence: round4(clamp01(0.8 * best.maxConf * (best.v / total))) };
}

export type NsfwClass = 'Drawing' | 'Hentai' | 'Neutral' | 'Porn' | 'Sexy';

/** nsfw_score from nsfwjs class probabilities (rule in the header). */
export function nsfwScore(p: Partial<Record<NsfwClass, number>>): number {
  return round4(clamp01((p.Porn ?? 0) + (p.Hentai ?? 0) + 0.5 * (p.Sexy ?? 0)));
}

// ---------- PII in text ----------

export type PiiType = 'email' | 'phone_number' | 'payment_card' | 'iban' | 'face';

function luhn(digits: string): boolean {
  let sum = 0;
  for (let i = 0; i < digits.length; i++) {
    let d = Number(digits[digits.length - 1 - i]);
    if (i % 2 === 1) {
      d *= 2;
      if (d > 9) d -= 9;
    }
    sum += d;
  }
  return sum % 10 === 0;
}

function ibanValid(raw: string): boolean {
  const s = raw.replace(/\s+/g, '').toUpperCase();
  if (!/^[A-Z]{2}\d{2}[A-Z0-9]{11,30}$/.test(s)) return false;
  const moved = s.slice(4) + s.slice(0, 4);
  let rem = 0;
  for (const ch of moved) {
    const v = /[A-Z]/.test(ch) ? String(ch.charCodeAt(0) - 55) : ch;
    for (const d of v) rem = (rem * 10 + Number(d)) % 97;
  }
  return rem === 1;
}

/** PII kinds found in OCR text (rule in the header). */
export function piiInText(text: string): PiiType[] {
  const found = new Set<PiiType>();
  if (/[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}/.test(text)) found.add('email');
  for (const m of text.matchAll(/(?:\d[ -]?){13,19}/g)) {
    const digits = m[0].replace(/\D/g, '');
    if (digits.length >= 13 && digits.length <= 19 && luhn(digits)) found.add('payment_card');
  }
  for (const m of text.matchAll(/\b[A-Z]{2}\d{2}(?:[ ]?[A-Z0-9]{4}){2,7}(?:[ ]?[A-Z0-9]{1,4})?\b/gi)) if (ibanValid(m[0])) found.add('iban');
  // phone: +CC …, (0xx) …, or digit groups separated by spaces/dashes/dots, 9–15 digits in all
  for (const m of text.matchAll(/(?:\+\d{1,3}[\s.-]?)?(?:\(\d{1,4}\)[\s.-]?)?\d{2,4}(?:[\s.-]\d{2,4}){2,4}/g)) {
    const digits = m[0].replace(/\D/g, '');
    if (digits.length >= 9 && digits.length <= 15 && !(found.has('payment_card') && digits.length >= 13 && luhn(digits))) found.add('phone_number');
  }
  return [...found].sort();
}

// ---------- OCR word filter ----------

export const OCR_MIN_CONFIDENCE = 60;

export interface OcrWordIn {
  text: string;
  confidence: number; // tesseract 0..100
}
export interface OcrLineIn {
  words: OcrWordIn[];
}

/**
 * Words kept from tesseract (D55: confidence reported 0..1): confidence ≥ 60/100 (offline-media.md:
 * photos without text give garbage at 27–35), at least one letter or digit, and — since
 * tesseract reads texture as stray 1–2 character "words" at high confidence — a 1–2 character
 * word only on a line that also keeps a word of 3+ characters.
 */
export function keepOcrWords(lines: readonly OcrLineIn[]): { full_text: string; words: { text: string; confidence: number }[] } {
  const outLines: { text: string; confidence: number }[][] = [];
  for (const line of lines) {
    const ok = line.words
      .map((w) => ({ text: w.text.trim(), confidence: w.confidence }))
      .filter((w) => w.confidence >= OCR_MIN_CONFIDENCE && /[\p{L}\p{N}]/u.test(w.text));
    const anchored = ok.some((w) => w.text.replace(/[^\p{L}\p{N}]/gu, '').length >= 3);
    const kept = anchored ? ok : [];
    if (kept.length) outLines.push(kept.map((w) => ({ text: w.text, confidence: round4(clamp01(w.confidence / 100)) })));
  }
  return { full_text: outLines.map((l) => l.map((w) => w.text).join(' ')).join('\n'), words: outLines.flat() };
}

// ---------- histograms / scene segments ----------

/** 8 × 8 × 8 RGB histogram, normalised to sum 1, from raw RGB(A) pixels. */
export function colourHistogram(data: Uint8Array, channels: number): Float64Array {
  const h = new Float64Array(512);
  let n = 0;
  for (let p = 0; p + 2 < data.length; p += channels) {
    h[((data[p]! >> 5) << 6) | ((data[p + 1]! >> 5) << 3) | (data[p + 2]! >> 5)]!++;
    n++;
  }
  if (n > 0) for (let i = 0; i < 512; i++) h[i]! /= n;
  return h;
}

/** √(1 − Bhattacharyya coefficient): 0 identical … 1 disjoint. */
export function histogramDistance(a: Float64Array, b: Float64Array): number {
  let bc = 0;
  for (let i = 0; i < a.length; i++) bc += Math.sqrt(a[i]! * b[i]!);
  return round4(Math.sqrt(Math.max(0, 1 - bc)));
}

export const SCENE_CUT_DISTANCE = 0.5;

export interface SceneSegment {
  index: number;
  start_seconds: number;
  end_seconds: number;
  keyframe_indexes: number[];
}

/** Segments from keyframe histograms (rule in the header). */
export function sceneSegments(frames: readonly { index: number; timestamp_seconds: number; histogram: Float64Array }[], duration: number): SceneSegment[] {
  const segs: SceneSegment[] = [];
  frames.forEach((f, i) => {
    const prev = frames[i - 1];
    if (!prev || histogramDistance(prev.histogram, f.histogram) >= SCENE_CUT_DISTANCE) {
      const start = prev ? round3((prev.timestamp_seconds + f.timestamp_seconds) / 2) : 0;
      const last = segs[segs.length - 1];
      if (last) last.end_seconds = start;
      segs.push({ index: segs.length, start_seconds: start, end_seconds: round3(duration), keyframe_indexes: [f.index] });
    } else segs[segs.length - 1]!.keyframe_indexes.push(f.index);
  });
  return segs;
}

const round3 = (n: number) => Math.round(n * 1000) / 1000;
