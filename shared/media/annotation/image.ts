/**
 * Image annotation: measured facts from the bytes + the provider's semantic parts (D51, D55).
 *
 * One call runs, concurrently (Promise.all):
 * - sharp: quality metrics and palette (image-quality.ts), plus two views of the auto-oriented
 *   image: RGB ≤ 640 px for the tfjs detectors and PNG ≤ 1024 px for OCR;
 * - tfjs (JS thread, serialised by a lock so concurrent calls do not interleave on one engine):
 *   human (BlazeFace faces ≥ 0.6, offline-media.md — a cat scored 0.83 at lower cut-offs; CenterNet
 *   COCO objects ≥ 0.45 (CenterNet scores random texture as "book" at up to 0.42), at most 20), then nsfwjs MobileNetV2;
 * - tesseract (its worker thread): words ≥ 60/100, derive.ts keepOcrWords.
 * Each detector that fails on the image leaves its field null with the reason in `unavailable`; an
 * undecodable image throws (sharp), which the caller treats as content mismatch. A detector that
 * cannot run for the machinery (its model does not load, ENOMEM, a module missing:
 * shared/media/failures.ts) throws too, so the step is retried and then dead-lettered (D66): the
 * content policy (D67) is never skipped because the NSFW model did not load.
 * Then the provider (local or bedrock) answers objects/scene/composition (+ violence); a bedrock
 * failure falls back to the local rules, recorded in `unavailable.provider`.
 */
import type { Sharp, SharpOptions } from 'sharp';
import { analyzeImage, type ImageQuality } from '../image-quality';
import { boundText } from './text-bound';
import { clamp01, keepOcrWords, nsfwScore, piiInText, round4, type Detection, type NsfwClass, type PiiType } from './derive';
import { loadHuman, loadNsfw, loadOcr, type Tensor } from './models';
import { AnalysisWorkerFailed, imageAnalysisOffload } from '../offload';
import { isMachineryFailure } from '../failures';
import { localAnnotatorOf, localSemantics } from './local';
import type { AnnotationProvider, ImageAnnotations, ImageFacts, SemanticParts, TextExtraction } from './types';

export const FACE_MIN_CONFIDENCE = 0.6;
export const OBJECT_MIN_CONFIDENCE = 0.45;
export const DETECT_MAX_SIDE = 640;
/** measured on the samples: 1024 px reads their text in 60–90 ms; 1280 px misread one and was 2× slower */
export const OCR_MAX_SIDE = 1024;

export interface Detectors {
  faces_objects?: boolean;
  ocr?: boolean;
  nsfw?: boolean;
}

export interface AnnotateImageOptions {
  /** default: annotationProviderFor() */
  provider?: AnnotationProvider;
  /** all on by default; switch one off to skip it (its fields become null + reason) */
  detectors?: Detectors;
}

type SharpFn = (input?: Buffer | string, options?: SharpOptions) => Sharp;
let sharpFn: SharpFn | undefined;
async function sharp(): Promise<SharpFn> {
  if (!sharpFn) {
    const mod = (await import('sharp')) as unknown as { default?: SharpFn } & SharpFn;
    sharpFn = mod.default ?? mod;
  }
  return sharpFn;
}

/** One tfjs job at a time (one engine, one JS thread: interleaving only costs memory). */
let tfQueue: Promise<unknown> = Promise.resolve();
function withTf<T>(fn: () => Promise<T>): Promise<T> {
  const run = tfQueue.then(fn, fn);
  tfQueue = run.catch(() => undefined);
  return run;
}

const why = (err: unknown) => (err instanceof Error ? err.message : String(err)).slice(0, 300);

/** A detector's failure as the reason its fields are null, unless the machinery failed: that is thrown (D66). */
function detectorFailure(label: string, err: unknown): string {
  if (isMachineryFailure(err)) throw err;
  return `${label}: ${why(err)}`;
}

/**
 * A model that does not load, or the NSFW classifier that does not run, is never about the image
 * (the bytes were decoded already): the step fails and is retried, then dead-lettered (D66), so the
 * content policy (D67) is never skipped. A failure tfjs or the model code raises without an errno
 * (a backend that did not initialise, a corrupt model file) counts too.
 */
function machineryFailure(label: string, err: unknown): never {
  if (isMachineryFailure(err)) throw err;
  throw new AnalysisWorkerFailed(`${label}: ${why(err)}`);
}

interface TfOut {
  faces: Detection[] | null;
  objects: Detection[] | null;
  nsfw: Partial<Record<NsfwClass, number>> | null;
  failures: Record<string, string>;
}

async function runTf(rgb: { data: Buffer; width: number; height: number }, d: Detectors): Promise<TfOut> {
  const out: TfOut = { faces: null, objects: null, nsfw: null, failures: {} };
  if (d.faces_objects === false && d.nsfw === false) return out;
  return withTf(async () => {
    let human;
    try {
      human = await loadHuman();
    } catch (err) {
      machineryFailure('tfjs models did not load', err);
    }
    const tf = human.tf;
    const x: Tensor = tf.tensor3d(new Int32Array(rgb.data), [rgb.height, rgb.width, 3], 'int32');
    try {
      if (d.faces_objects !== false) {
        const x4 = tf.expandDims(x, 0);
        try {
          const r = await human.detect(x4);
          if (r.error) throw new Error(r.error);
          out.faces = r.face
            .filter((f) => (f.boxScore ?? f.score) >= FACE_MIN_CONFIDENCE)
            .map((f) => ({ label: 'face', confidence: round4(f.boxScore ?? f.score), box: f.boxRaw }));
          out.objects = r.object
            .filter((o) => o.score >= OBJECT_MIN_CONFIDENCE)
            .sort((a, b) => b.score - a.score)
            .map((o) => ({ label: o.label, confidence: round4(o.score), box: o.boxRaw }));
        } catch (err) {
          out.failures.faces = out.failures.objects = detectorFailure('human failed', err);
        } finally {
          x4.dispose();
        }
      }
      if (d.nsfw !== false) {
        try {
          const model = await loadNsfw();
          const preds = await model.classify(x, 5);
          out.nsfw = Object.fromEntries(preds.map((p) => [p.className, round4(clamp01(p.probability))]));
        } catch (err) {
          machineryFailure('nsfwjs failed', err);
        }
      }
    } finally {
      x.dispose();
    }
    return out;
  });
}

async function runOcr(png: Buffer): Promise<TextExtraction> {
  const worker = await loadOcr();
  const { data } = await worker.recognize(png, {}, { blocks: true, text: false });
  const lines = (data.blocks ?? []).flatMap((b) => b.paragraphs.flatMap((p) => p.lines));
  return keepOcrWords(lines);
}

/** Measured facts of an image (see the header). Throws only when sharp cannot decode it. */
export async function measureImageFacts(input: Buffer | string, detectors: Detectors = {}, quality?: ImageQuality): Promise<{ facts: ImageFacts; quality: ImageQuality }> {
  const offload = imageAnalysisOffload(); // the local runtime's model workers (../offload.ts)
  if (offload) return offload.measureImageFacts(input, detectors, quality);
  const s = await sharp();
  const oriented = () => s(input, { failOn: 'none' }).rotate().flatten({ background: '#ffffff' });
  const rgbP = oriented()
    .resize(DETECT_MAX_SIDE, DETECT_MAX_SIDE, { fit: 'inside', withoutEnlargement: true })
    .removeAlpha()
    .toColourspace('srgb')
    .raw()
    .toBuffer({ resolveWithObject: true })
    .then(({ data, info }) => ({ data, width: info.width, height: info.height }));
  const ocrP =
    detectors.ocr === false
      ? Promise.resolve(null)
      : oriented()
          .resize(OCR_MAX_SIDE, OCR_MAX_SIDE, { fit: 'inside', withoutEnlargement: true })
          .png({ compressionLevel: 1 })
          .toBuffer()
          .then(runOcr)
          .then(
            (t) => ({ text: t, failure: null }),
            (err: unknown) => ({ text: null, failure: `tesseract failed: ${why(err)}` }),
          );
  const [q, tf, ocr] = await Promise.all([quality ? Promise.resolve(quality) : analyzeImage(input), rgbP.then((rgb) => runTf(rgb, detectors).then((o) => ({ ...o, rgb }))), ocrP]);
  const failures = { ...tf.failures };
  if (detectors.faces_objects === false) failures.faces = failures.objects = 'face and object detection switched off';
  if (detectors.nsfw === false) failures.nsfw = 'nsfw classification switched off';
  if (detectors.ocr === false) failures.text = 'OCR switched off';
  else if (ocr?.failure) failures.text = ocr.failure;
  return {
    quality: q,
    facts: {
      width: q.width,
      height: q.height,
      view_width: tf.rgb.width,
      view_height: tf.rgb.height,
      faces: tf.faces,
      objects: tf.objects,
      text: ocr?.text ?? null,
      nsfw: tf.nsfw,
      failures,
    },
  };
}

/** Merge measured facts and the provider's semantic parts into the spec shape. */
export function mergeImageAnnotations(q: ImageQuality, facts: ImageFacts, sem: SemanticParts, provider: 'local' | 'bedrock'): ImageAnnotations {
  const unavailable: Record<string, string> = { ...sem.unavailable };
  const text = facts.text ?? sem.text_extraction ?? null;
  if (facts.text) delete unavailable['text_extraction.words.confidence']; // local OCR measured each word
  if (!text) unavailable.text_extraction = facts.failures.text ?? 'OCR did not run';
  if (!facts.faces) unavailable.face_count = facts.failures.faces ?? 'face detection did not run';
  if (!facts.nsfw) unavailable.nsfw_score = facts.failures.nsfw ?? 'nsfw classification did not run';
  const pii = new Set<PiiType>(text ? piiInText(text.full_text) : []);
  if (facts.faces && facts.faces.length > 0) pii.add('face');
  const piiKnown = text !== null || facts.faces !== null;
  if (!piiKnown) unavailable.pii_detected = unavailable.pii_types = 'neither OCR nor face detection ran';
  else if (facts.faces === null) unavailable['pii_types.face'] = `face detection did not run, so faces are not counted: ${facts.failures.faces ?? 'unknown'}`;
  else if (!text) unavailable['pii_types.text'] = 'OCR did not run, so text (e-mail addresses, phone numbers) is not counted';
  const violence = sem.violence_score ?? null;
  if (violence !== null) delete unavailable.violence_score;
  const out: ImageAnnotations = {
    type: 'image',
    width: q.width,
    height: q.height,
    objects: sem.objects,
    scene: sem.scene,
    // Bounded after the PII above was looked for in the whole text.
    text_extraction: text ? boundText(text) : null,
    color_palette: q.color_palette,
    composition: sem.composition,
    face_count: facts.faces ? facts.faces.length : null,
    quality_metrics: { blur_score: q.blur_score, exposure: q.exposure, noise_level: q.noise_level },
    safety: {
      nsfw_score: facts.nsfw ? nsfwScore(facts.nsfw) : null,
      violence_score: violence,
      pii_detected: piiKnown ? pii.size > 0 : null,
      pii_types: piiKnown ? [...pii].sort() : null,
      nsfw_classes: facts.nsfw,
    },
    annotation_model: sem.model === localAnnotatorOf(facts) ? sem.model : `${sem.model} + ${localAnnotatorOf(facts)}`,
    annotation_provider: provider,
  };
  if (Object.keys(unavailable).length) out.unavailable = unavailable;
  return out;
}

/**
 * A provider that names objects without boxes (Bedrock) keeps the object detector's boxes: the
 * detector's objects come first, with their pixel boxes (what the COCO export's annotations are
 * made of, D73), then the objects the provider named that the detector did not find, box null.
 */
export function withDetectorBoxes(sem: SemanticParts, facts: ImageFacts): SemanticParts {
  if (!facts.objects || !sem.objects) return sem;
  const detected = localSemantics(facts).objects ?? [];
  const found = new Set(detected.map((o) => o.label.toLowerCase()));
  const named = sem.objects.filter((o) => !found.has(o.label.toLowerCase()));
  const unavailable = { ...sem.unavailable };
  if (named.some((o) => o.bbox === null)) unavailable['objects.bbox'] = 'objects the model named that the box detector did not find have no box (the model places them by position and coverage)';
  else delete unavailable['objects.bbox'];
  return { ...sem, objects: [...detected, ...named], unavailable };
}

/** Full image annotations (D51 shape). */
export async function annotateImageFull(input: Buffer | string, quality: ImageQuality | undefined, provider: AnnotationProvider, detectors: Detectors = {}): Promise<ImageAnnotations> {
  const { facts, quality: q } = await measureImageFacts(input, detectors, quality);
  if (provider.name === 'local') return mergeImageAnnotations(q, facts, localSemantics(facts), 'local');
  let jpeg: Promise<Buffer> | undefined;
  const jpegOf = async () =>
    (jpeg ??= (await sharp())(input, { failOn: 'none' })
      .rotate()
      .resize(1568, 1568, { fit: 'inside', withoutEnlargement: true })
      .flatten({ background: '#ffffff' })
      .jpeg({ quality: 85 })
      .toBuffer());
  try {
    return mergeImageAnnotations(q, facts, withDetectorBoxes(await provider.describeImage({ jpeg: jpegOf, facts }), facts), provider.name);
  } catch (err) {
    // Only an answer the model gave but that is unusable falls back to the local rules (recorded).
    // A provider that failed or did not answer (throttled, timed out, unreachable) fails the step,
    // so the message comes back with the pipeline's backoff (D66) instead of freezing a File
    // without the model's parts (violence_score among them).
    if ((err as Error | undefined)?.name !== 'BedrockOutputError') throw err;
    const sem = localSemantics(facts);
    sem.unavailable.provider = `${provider.name} failed, local rules used: ${why(err)}`;
    return mergeImageAnnotations(q, facts, sem, 'local');
  }
}
