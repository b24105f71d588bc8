/**
 * D58 honest fields: `annotation_model` names only what ran; what no model computed is null with
 * its reason; no confidence is copied from one thing to another. Cheap checks (no tfjs models):
 * the merge of measured facts, the Bedrock reply parser, and a video whose keyframes were not
 * annotated.
 */
import type { ConverseCommandOutput } from '@aws-sdk/client-bedrock-runtime';
import { analyzeImage } from '../../shared/media/image-quality';
import { localSemantics, mergeImageAnnotations, parseAnnotationOutput, withDetectorBoxes } from '../../shared/media/annotation';
import type { ImageFacts } from '../../shared/media/annotation';
import { annotateVideo } from '../../shared/media/annotate-image';
import { parseConverseOutput } from '../../shared/scoring';
import { detailedJpeg, hasFfmpeg, videoFixtures } from '../fixtures/media';
import { annotationReplies } from '../fixtures/bedrock-annotation.published-format';

const reply = (text: string): ConverseCommandOutput => ({
  $metadata: {},
  output: { message: { role: 'assistant', content: [{ text }] } },
  stopReason: 'end_turn',
  usage: { inputTokens: 10, outputTokens: 10, totalTokens: 20 },
  metrics: { latencyMs: 100 },
});

describe('honest annotation fields (D58)', () => {
  it('annotation_model names only the local detectors that ran on the file', async () => {
    const bytes = await detailedJpeg(320, 240);
    const q = await analyzeImage(bytes);
    const facts: ImageFacts = {
      width: q.width,
      height: q.height,
      view_width: q.width,
      view_height: q.height,
      faces: [],
      objects: [],
      text: null, // OCR did not run
      nsfw: null, // nsfwjs did not run
      failures: { text: 'OCR switched off', nsfw: 'nsfw classification switched off' },
    };
    const a = mergeImageAnnotations(q, facts, localSemantics(facts), 'local');
    expect(a.annotation_model).toMatch(/human 3\.3\.6/);
    expect(a.annotation_model).not.toMatch(/tesseract|nsfwjs/);
    expect(a.text_extraction).toBeNull();
    expect(a.unavailable?.text_extraction).toBe('OCR switched off');
    expect(a.safety.nsfw_score).toBeNull();
    expect(a.unavailable?.nsfw_score).toBe('nsfw classification switched off');
  });

  it('nothing looked for PII: pii_types is null with the reason, not an empty list; faces not looked at are named', async () => {
    const q = await analyzeImage(await detailedJpeg(320, 240));
    const base = { width: q.width, height: q.height, view_width: q.width, view_height: q.height, objects: [], nsfw: null };
    const none = mergeImageAnnotations(q, { ...base, faces: null, text: null, failures: { faces: 'human failed: x', text: 'OCR switched off' } }, localSemantics({ ...base, faces: null, text: null, failures: {} }), 'local');
    expect([none.safety.pii_detected, none.safety.pii_types]).toEqual([null, null]);
    expect(none.unavailable?.pii_types).toBe('neither OCR nor face detection ran');
    const textOnly = mergeImageAnnotations(q, { ...base, faces: null, text: { full_text: 'hello', words: [] } as never, failures: { faces: 'human failed: x' } }, localSemantics({ ...base, faces: null, text: null, failures: {} }), 'local');
    expect(textOnly.safety.pii_types).toEqual([]);
    expect(textOnly.unavailable?.['pii_types.face']).toMatch(/face detection did not run/);
  });

  it('a provider that names objects without boxes keeps the detector\'s boxes: detected objects first with pixel boxes, then the ones only the model named', () => {
    const facts: ImageFacts = {
      width: 800,
      height: 600,
      view_width: 640,
      view_height: 480,
      faces: [],
      objects: [{ label: 'bicycle', confidence: 0.8, box: [0.1, 0.5, 0.2, 0.3] }],
      text: null,
      nsfw: null,
      failures: {},
    };
    const named = [
      { label: 'storefront', confidence: 0.92, position: 'center' as const, approximate_coverage: 0.55, bbox: null },
      { label: 'Bicycle', confidence: 0.7, position: 'bottom-left' as const, approximate_coverage: 0.06, bbox: null },
    ];
    const out = withDetectorBoxes({ objects: named, scene: null, composition: null, model: 'bedrock:m', unavailable: { 'objects.bbox': 'by position' } }, facts);
    expect(out.objects!.map((o) => [o.label, o.bbox])).toEqual([
      ['bicycle', [80, 300, 160, 180]],
      ['storefront', null],
    ]);
    expect(out.unavailable['objects.bbox']).toMatch(/did not find have no box/);
    // No detector run: the model's objects as they are.
    const noDetector = withDetectorBoxes({ objects: named, scene: null, composition: null, model: 'bedrock:m', unavailable: {} }, { ...facts, objects: null });
    expect(noDetector.objects).toEqual(named);
  });

  it('text read by the model has no per-word confidence: each word null with the reason, never the block confidence', () => {
    const sem = parseAnnotationOutput(annotationReplies.good, 'amazon.nova-pro-v1:0');
    expect(sem.text_extraction).toEqual({ full_text: 'OPEN', words: [{ text: 'OPEN', confidence: null }], confidence: 0.9 });
    expect(sem.unavailable['text_extraction.words.confidence']).toMatch(/no per-word confidence/);
  });

  it('one parser for every Bedrock reply: scoring and annotation fail alike on the same broken answer', () => {
    const broken = reply('I think it is fine.');
    expect(() => parseConverseOutput(broken, 'm')).toThrow(/model answer is not JSON/);
    expect(() => parseAnnotationOutput(broken, 'm')).toThrow(/model answer is not JSON/);
    const empty = { ...reply(''), output: { message: { role: 'assistant' as const, content: [] } } };
    expect(() => parseConverseOutput(empty, 'm')).toThrow(/model returned no text/);
    expect(() => parseAnnotationOutput(empty, 'm')).toThrow(/model returned no text/);
  });

  it('a video without a sound track gives each sound figure null with that reason', async () => {
    const v = await annotateVideo(videoFixtures.mov(2), { annotateKeyframes: false });
    expect([v.integrated_lufs, v.mean_volume_db, v.noise_level]).toEqual([null, null, null]);
    for (const k of ['integrated_lufs', 'mean_volume_db', 'noise_level']) expect(v.unavailable[k]).toBe('no audio stream');
  });

  it('a video whose keyframes were not annotated names no keyframe model', async () => {
    const v = await annotateVideo(videoFixtures.mp4(2), { annotateKeyframes: false });
    expect(v.annotation_model).not.toMatch(/keyframes|local-annotator|tesseract|nsfwjs|human/);
    expect(v.unavailable.keyframes).toBe('keyframe annotation switched off');
    expect(v.face_count_max).toBeNull();
    expect(v.unavailable.face_count_max).toBe('no keyframe was annotated');
    expect(v.transcript).toBeNull();
    expect(v.unavailable.transcript).toMatch(/no offline speech model/);
    expect(v.actions).toBeNull();
    expect(v.unavailable.actions).toEqual(expect.any(String));
  });
});
