/**
 * Annotation providers behind one interface (AnnotationProvider):
 * - `local`: offline detectors + derive.ts rules — the embedded runtime and the tests;
 * - `bedrock`: a multimodal model for the semantic parts — the deployed stack.
 * Measured parts (dimensions, palette, quality; faces, OCR, NSFW where the local models run) come
 * from the bytes whichever provider runs.
 *
 * Choice (`annotationProviderFor`): env ANNOTATION_PROVIDER (`local` | `bedrock`) wins; else
 * `bedrock` inside a Lambda (AWS_LAMBDA_FUNCTION_NAME set) unless RUNTIME=local, else `local`.
 * The stack should set ANNOTATION_PROVIDER explicitly.
 */
import { BedrockAnnotationProvider, type BedrockAnnotationOptions } from './bedrock';
import { LocalAnnotationProvider } from './local';
import type { AnnotationProvider } from './types';

export * from './types';
export * from './derive';
export { LocalAnnotationProvider, LOCAL_ANNOTATOR, localAnnotatorOf, localSemantics } from './local';
export { BedrockAnnotationProvider, AnnotationOutputSchema, buildAnnotationRequest, parseAnnotationOutput } from './bedrock';
export { measureImageFacts, mergeImageAnnotations, annotateImageFull, withDetectorBoxes, FACE_MIN_CONFIDENCE, OBJECT_MIN_CONFIDENCE, type AnnotateImageOptions, type Detectors } from './image';
export { measureAudio, measureNoise, parseLoudness, spectralFlatness, noiseLevelOfAudio, SPEECH_UNAVAILABLE, type Loudness, type AudioNoise } from './audio';
export { warmUp, shutdownModels, loadHuman, loadNsfw, loadOcr } from './models';

let defaultProvider: AnnotationProvider | undefined;

export function annotationProviderFor(opts: { provider?: string; bedrock?: BedrockAnnotationOptions } = {}): AnnotationProvider {
  const name = (opts.provider ?? process.env.ANNOTATION_PROVIDER ?? '').trim().toLowerCase();
  if (name === 'local') return new LocalAnnotationProvider();
  if (name === 'bedrock') return new BedrockAnnotationProvider(opts.bedrock);
  if (name) throw new Error(`ANNOTATION_PROVIDER must be local or bedrock, not ${JSON.stringify(name)}`);
  return process.env.AWS_LAMBDA_FUNCTION_NAME && process.env.RUNTIME !== 'local' ? new BedrockAnnotationProvider(opts.bedrock) : new LocalAnnotationProvider();
}

/** The process-wide provider (one Bedrock client per process). */
export function defaultAnnotationProvider(): AnnotationProvider {
  return (defaultProvider ??= annotationProviderFor());
}
