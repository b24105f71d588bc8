/**
 * `local` annotation provider: the semantic parts from the offline detectors' measurements
 * (derive.ts rules). Used by the embedded runtime and the tests; also the fallback when the
 * bedrock provider fails, so a file never ends up with placeholder labels.
 */
import { compositionOf, sceneFromObjects, toAnnotatedObject, type Detection } from './derive';
import type { AnnotationProvider, DescribeInput, SemanticParts } from './types';
import { HUMAN_VERSION, NSFWJS_VERSION, TESSERACT_VERSION } from './models';

export const LOCAL_ANNOTATOR = `local-annotator/1 (tesseract.js ${TESSERACT_VERSION} eng best_int, human ${HUMAN_VERSION} blazeface+centernet, nsfwjs ${NSFWJS_VERSION} mobilenet_v2)`;

/**
 * `annotation_model` of the local part, naming only the detectors that ran on this file (D58):
 * `local-annotator/1 (<those that ran>)`, or `local-annotator/1 (measurements only)`.
 */
export function localAnnotatorOf(facts: DescribeInput['facts']): string {
  const ran: string[] = [];
  if (facts.text) ran.push(`tesseract.js ${TESSERACT_VERSION} eng best_int`);
  if (facts.faces || facts.objects) ran.push(`human ${HUMAN_VERSION} blazeface+centernet`);
  if (facts.nsfw) ran.push(`nsfwjs ${NSFWJS_VERSION} mobilenet_v2`);
  return `local-annotator/1 (${ran.join(', ') || 'measurements only'})`;
}

export function localSemantics(facts: DescribeInput['facts']): SemanticParts {
  const unavailable: Record<string, string> = {};
  const objects = facts.objects;
  if (!objects) unavailable.objects = `object detector did not run: ${facts.failures.objects ?? 'unknown'}`;
  const scene = objects ? sceneFromObjects(objects) : null;
  if (objects && !scene)
    unavailable.scene = 'no scene-defining object detected; no offline scene classifier is installed, so the scene is only inferred from COCO objects';
  else if (!objects) unavailable.scene = 'object detector did not run (scene is inferred from objects)';
  const subjects: Detection[] = [...(objects ?? []), ...(facts.faces ?? [])];
  const composition = objects || facts.faces ? compositionOf(subjects) : null;
  if (!composition) unavailable.composition = objects || facts.faces ? 'no detected subject to place' : 'no detector ran';
  unavailable.violence_score = 'no offline violence model is installed (nsfwjs classes: drawing, hentai, neutral, porn, sexy)';
  // Boxes are normalised to the upright view (EXIF orientation applied, downscaled for the
  // detector); bbox is in pixels of the full-size upright image: the stored size, turned when the
  // orientation swaps the sides.
  const turned = facts.width !== facts.height && facts.view_width > facts.view_height !== facts.width > facts.height;
  const view = turned ? { width: facts.height, height: facts.width } : { width: facts.width, height: facts.height };
  return { objects: objects ? objects.map((o) => toAnnotatedObject(o, view)) : null, scene, composition, violence_score: null, model: localAnnotatorOf(facts), unavailable };
}

export class LocalAnnotationProvider implements AnnotationProvider {
  readonly name = 'local' as const;
  async describeImage(input: DescribeInput): Promise<SemanticParts> {
    return localSemantics(input.facts);
  }
}
