/**
 * Image annotation shape (spec "File.annotations", D51 full shape; D55 encodings) and the provider
 * interface. A field is `null` only when it was not analysed; the reason is then in
 * `unavailable[field]`. An analysis that ran and found nothing gives an empty value (`[]`,
 * `face_count: 0`, `full_text: ''`), never null.
 */
import type { Exposure, NoiseLevel } from '../image-quality';
import type { AnnotatedObject, Detection, NsfwClass, PiiType, Scene } from './derive';

export interface TextExtraction {
  full_text: string;
  /**
   * each word's OCR confidence 0..1 (D55); only words ≥ 60/100 are kept. Null when the reader
   * gives no per-word confidence (a multimodal model), with the reason in
   * `unavailable['text_extraction.words.confidence']`.
   */
  words: { text: string; confidence: number | null }[];
  /** the whole text's confidence 0..1 when the reader gives one for the block (the model) */
  confidence?: number;
  /** as stored (text-bound.ts): true when only the first words are here, the text being longer than its bound */
  truncated?: boolean;
  /** as stored: the whole text's count of words */
  total_words?: number;
  /** as stored: the whole text's length in characters (code points) */
  total_characters?: number;
}

export interface Safety {
  /** 0..1, see derive.ts nsfwScore; null when nsfwjs did not run */
  nsfw_score: number | null;
  /** 0..1 from a model that scores violence (the bedrock provider); null locally (no offline model) */
  violence_score: number | null;
  /** null only when neither OCR nor face detection ran */
  pii_detected: boolean | null;
  /** null when neither OCR nor face detection ran (nothing was looked for) */
  pii_types: PiiType[] | null;
  nsfw_classes: Partial<Record<NsfwClass, number>> | null;
}

export interface ImageAnnotations {
  type: 'image';
  /** stored bytes' dimensions (D55) */
  width: number;
  height: number;
  objects: AnnotatedObject[] | null;
  scene: Scene | null;
  text_extraction: TextExtraction | null;
  color_palette: string[];
  composition: string | null;
  face_count: number | null;
  quality_metrics: { blur_score: number; exposure: Exposure; noise_level: NoiseLevel };
  safety: Safety;
  annotation_model: string;
  /** which provider produced the semantic parts */
  annotation_provider: 'local' | 'bedrock';
  /** field → why it is null (not analysed); absent when everything ran */
  unavailable?: Record<string, string>;
}

/** What the bytes and the local detectors measured (null = that detector did not run). */
export interface ImageFacts {
  width: number;
  height: number;
  /** oriented view size the boxes refer to */
  view_width: number;
  view_height: number;
  faces: Detection[] | null;
  objects: Detection[] | null;
  text: TextExtraction | null;
  nsfw: Partial<Record<NsfwClass, number>> | null;
  /** detector → why it did not run */
  failures: Record<string, string>;
}

/** The semantic parts a provider answers. */
export interface SemanticParts {
  objects: AnnotatedObject[] | null;
  scene: Scene | null;
  composition: string | null;
  /** a provider may read text when local OCR did not run */
  text_extraction?: TextExtraction | null;
  violence_score?: number | null;
  model: string;
  unavailable: Record<string, string>;
}

export interface DescribeInput {
  /** the image as JPEG ≤ 1568 px (what a multimodal model takes) — built lazily */
  jpeg: () => Promise<Buffer>;
  facts: ImageFacts;
}

export interface AnnotationProvider {
  readonly name: 'local' | 'bedrock';
  describeImage(input: DescribeInput): Promise<SemanticParts>;
}
