/**
 * Annotations of delivered files (spec "File.annotations"; D51 full image shape, D54 fan-out, D55
 * encodings). Every label is a real measurement or a real model output; a part that was not
 * analysed is `null` with the reason in `unavailable[field]` — never a placeholder.
 *
 * - Image (`annotateImage`): measured dimensions, palette and quality (image-quality.ts); faces,
 *   COCO objects, OCR and NSFW from the offline models (annotation/models.ts); objects, scene and
 *   composition from the provider (annotation/: `local` rules or `bedrock`). Rules: annotation/derive.ts.
 * - Audio (`annotateAudio`): duration/channels/sample rate/codec, EBU R128 loudness and a measured
 *   noise level (annotation/audio.ts); speech-derived fields null with the reason.
 * - Video (`annotateVideo`): probe fields, sound-track loudness, 3 keyframes at 25/50/75 % each
 *   annotated as an image, scene segments from keyframe histogram distance, objects across
 *   keyframes. `keyframes.ts` stores the keyframe PNGs through an uploader callback.
 *
 * Nothing heavy loads at import time; models load on first use and stay loaded (models.ts).
 */
import { analyzeImage, type ImageQuality, type NoiseLevel } from './image-quality';
import { isMachineryFailure } from './failures';
import { ffprobe, ffprobePath, withFile } from './ffmpeg';
import { DEFAULT_FRACTIONS, DEFAULT_MAX_SIDE, extractKeyframesUncached, keyframeCache, loadSharp, type ExtractedKeyframe } from './frames';
import { probeFields } from './probe-fields';
import { readAudioInfo } from './audio-info';
import { annotateImageFull, type AnnotateImageOptions } from './annotation/image';
import { defaultAnnotationProvider } from './annotation/index';
import { measureAudio, type Loudness as R128Loudness } from './annotation/audio';
import { SPEECH_UNAVAILABLE } from '../speech/local';
import { colourHistogram, sceneSegments, round4, type SceneSegment } from './annotation/derive';
import type { ImageAnnotations } from './annotation/types';
import { SPEECH_FIELDS } from '../speech/annotate';
import type { EmotionTone, Transcript } from '../speech/types';

export type { ImageAnnotations } from './annotation/types';
export { DEFAULT_FRACTIONS, DEFAULT_MAX_SIDE, extractKeyframes, loudness, type ExtractedKeyframe, type Loudness } from './frames';
export type { AnnotateImageOptions } from './annotation/image';

/** annotation_model of audio (measurement only: ffmpeg), when every measurement ran. */
export const ANNOTATION_MODEL = 'local-media-analysis/2 (ffmpeg ebur128, volumedetect, pcm noise floor)';

/** The audio measurements that did run, named as ANNOTATION_MODEL names them (D58: only what ran). */
function audioModel(ran: { loudness: boolean; noise: boolean }): string {
  if (ran.loudness && ran.noise) return ANNOTATION_MODEL;
  const parts = [...(ran.loudness ? ['ffmpeg ebur128, volumedetect'] : []), ...(ran.noise ? ['pcm noise floor'] : [])];
  return `local-media-analysis/2 (${parts.length ? parts.join(', ') : 'no sound measurement ran'})`;
}

/**
 * Image annotations from the bytes (or a local path). `quality` may be passed if already
 * computed; `opts.provider` overrides the process default (annotation/index.ts).
 */
export async function annotateImage(input: Buffer | string, quality?: ImageQuality, opts: AnnotateImageOptions = {}): Promise<ImageAnnotations> {
  const q = quality ?? (await analyzeImage(input)); // throws on undecodable bytes (content mismatch)
  return annotateImageFull(input, q, opts.provider ?? defaultAnnotationProvider(), opts.detectors);
}

export interface AudioAnnotations {
  type: 'audio';
  duration_seconds: number | null;
  channels: number | null;
  sample_rate: number | null;
  codec: string | null;
  bit_rate: number | null;
  /** EBU R128 integrated loudness (LUFS) */
  integrated_lufs: number | null;
  loudness_range_lu: number | null;
  true_peak_dbfs: number | null;
  mean_volume_db: number | null;
  max_volume_db: number | null;
  /** true when the whole file is at or below −60 dBFS mean (nothing audible) */
  silent: boolean | null;
  noise_level: NoiseLevel | null;
  noise_floor_dbfs: number | null;
  /**
   * Speech (D65): Amazon Transcribe (transcript, language, speaker_count) and the Bedrock text model
   * (topics, keywords, emotion_tone), filled in at the verdict (shared/speech/annotate.ts); null
   * with the reason in `unavailable` where no recogniser ran or there is no speech.
   */
  speaker_count: number | null;
  language: string | null;
  transcript: Transcript | null;
  topics: string[] | null;
  keywords: string[] | null;
  emotion_tone: EmotionTone | null;
  /** No provider computes these (null, reason in `unavailable`). */
  room_acoustics: null;
  background_sounds: null;
  speaker_demographics: null;
  annotation_model: string;
  unavailable: Record<string, string>;
}

/** Fields no provider computes, with the reason (D58). */
export const NOT_COMPUTED: Record<string, string> = {
  room_acoustics: 'no model that measures room acoustics runs, locally or deployed',
  background_sounds: 'no sound-event classifier runs, locally or deployed',
  speaker_demographics: 'not computed: no provider estimates age or gender of speakers, by design',
  actions: 'no action-recognition model runs, locally or deployed',
};

export async function annotateAudio(input: Buffer | string, contentType: string): Promise<AudioAnnotations> {
  const [a, m] = await Promise.all([
    readAudioInfo(input, contentType),
    measureAudio(input).catch((err: Error) => {
      if (isMachineryFailure(err)) throw err; // D66: the step fails and is retried
      return { loudness: null, noise: null, failures: { loudness: err.message.slice(0, 300), noise_level: err.message.slice(0, 300) } as Record<string, string> };
    }),
  ]);
  if ((a.channels === null || a.sample_rate === null || a.duration_seconds === null) && ffprobePath()) {
    const p = probeFields(await ffprobe(input));
    a.duration_seconds ??= p.duration_seconds;
    a.channels ??= p.channels;
    a.sample_rate ??= p.sample_rate;
    a.codec ??= p.audio_codec;
    a.bit_rate ??= p.bit_rate;
  }
  const l: R128Loudness | null = m.loudness;
  // Each field a measurement left null carries its reason under its own name.
  const unavailable: Record<string, string> = {};
  const loudnessWhy = m.failures.loudness ? `loudness measurement failed: ${m.failures.loudness}` : null;
  for (const k of ['integrated_lufs', 'loudness_range_lu', 'true_peak_dbfs'] as const) {
    if (l?.[k] == null) unavailable[k] = loudnessWhy ?? 'no loudness could be measured (the sound track is silent or too short)';
  }
  for (const k of ['mean_volume_db', 'max_volume_db'] as const) if (l?.[k] == null) unavailable[k] = loudnessWhy ?? 'no volume could be measured';
  if (l?.mean_volume_db == null) unavailable.silent = loudnessWhy ?? 'no volume could be measured';
  if (!m.noise) {
    const noiseWhy = m.failures.noise_level ? `noise measurement failed: ${m.failures.noise_level}` : 'no noise level could be measured';
    unavailable.noise_level = noiseWhy;
    unavailable.noise_floor_dbfs = noiseWhy;
  }
  for (const k of SPEECH_FIELDS.audio) unavailable[k] = SPEECH_UNAVAILABLE;
  for (const k of ['room_acoustics', 'background_sounds', 'speaker_demographics']) unavailable[k] = NOT_COMPUTED[k]!;
  return {
    type: 'audio',
    ...a,
    integrated_lufs: l?.integrated_lufs ?? null,
    loudness_range_lu: l?.loudness_range_lu ?? null,
    true_peak_dbfs: l?.true_peak_dbfs ?? null,
    mean_volume_db: l?.mean_volume_db ?? null,
    max_volume_db: l?.max_volume_db ?? null,
    silent: l?.mean_volume_db == null ? null : l.mean_volume_db <= -60,
    noise_level: m.noise?.noise_level ?? null,
    noise_floor_dbfs: m.noise?.noise_floor_dbfs ?? null,
    speaker_count: null,
    language: null,
    transcript: null,
    topics: null,
    keywords: null,
    emotion_tone: null,
    room_acoustics: null,
    background_sounds: null,
    speaker_demographics: null,
    annotation_model: audioModel({ loudness: !!m.loudness && !m.failures.loudness, noise: !!m.noise }),
    unavailable,
  };
}

export interface KeyframeAnnotation {
  index: number;
  timestamp_seconds: number;
  width: number | null;
  height: number | null;
  annotations: ImageAnnotations | null;
}

export interface VideoAnnotations {
  type: 'video';
  duration_seconds: number | null;
  width: number | null;
  height: number | null;
  fps: number | null;
  codec: string | null;
  rotation: number | null;
  has_audio: boolean;
  audio_codec: string | null;
  channels: number | null;
  sample_rate: number | null;
  bit_rate: number | null;
  /** sound track (null without one) */
  integrated_lufs: number | null;
  mean_volume_db: number | null;
  noise_level: NoiseLevel | null;
  /** segments from keyframe histogram distance (derive.ts) */
  scenes: SceneSegment[] | null;
  /** each keyframe's image annotations ("keyframe descriptions") */
  keyframes: KeyframeAnnotation[] | null;
  /** labels seen across keyframes (presence per keyframe, not identity tracking) */
  objects: { label: string; keyframe_indexes: number[]; max_confidence: number }[] | null;
  face_count_max: number | null;
  /** No provider computes actions: null, reason in `unavailable`. */
  actions: null;
  /** the sound track's speech (D65), filled in at the verdict; null with the reason otherwise */
  transcript: Transcript | null;
  language: string | null;
  speaker_count: number | null;
  annotation_model: string;
  unavailable: Record<string, string>;
}

export interface AnnotateVideoOptions extends AnnotateImageOptions {
  /** keyframes already extracted (else extracted here, and reused by extractKeyframes) */
  keyframes?: ExtractedKeyframe[];
  /** default true */
  annotateKeyframes?: boolean;
}

export function annotateVideo(input: Buffer | string, opts: AnnotateVideoOptions = {}): Promise<VideoAnnotations> {
  // One copy in /tmp for every tool that reads the video (probe, loudness, keyframes), not one
  // each: a 250 MB video would otherwise hold two copies at once there (shared/work/object-budget.ts).
  return withFile(input, (file) => annotateVideoAt(file, input, opts));
}

async function annotateVideoAt(file: string, input: Buffer | string, opts: AnnotateVideoOptions): Promise<VideoAnnotations> {
  const p = probeFields(await ffprobe(file));
  const unavailable: Record<string, string> = { actions: NOT_COMPUTED.actions! };
  for (const k of SPEECH_FIELDS.video) unavailable[k] = p.has_audio ? SPEECH_UNAVAILABLE : 'the video has no sound track';
  // Caught at once (it is awaited later, after the keyframes): its error is kept for the reason.
  let audioError: unknown = null;
  const audioP = p.has_audio
    ? measureAudio(file).catch((err: unknown) => {
        audioError = err;
        return null;
      })
    : Promise.resolve(null);
  let frames: ExtractedKeyframe[] | null = opts.keyframes ?? null;
  if (!frames && p.duration_seconds && p.has_video) {
    frames = await extractKeyframesUncached(file, p.duration_seconds, DEFAULT_FRACTIONS, DEFAULT_MAX_SIDE);
    if (Buffer.isBuffer(input)) keyframeCache.set(input, { duration: p.duration_seconds, frames });
  }
  let keyframes: KeyframeAnnotation[] | null = null;
  let scenes: SceneSegment[] | null = null;
  if (frames && frames.length) {
    const sharp = await loadSharp();
    const hist = await Promise.all(
      frames.map(async (f) => {
        const { data, info } = await sharp(f.png).resize(64, 64, { fit: 'fill' }).removeAlpha().raw().toBuffer({ resolveWithObject: true });
        return { index: f.index, timestamp_seconds: f.timestamp_seconds, histogram: colourHistogram(data, info.channels) };
      }),
    );
    scenes = sceneSegments(hist, p.duration_seconds ?? frames[frames.length - 1]!.timestamp_seconds);
    const annotate = opts.annotateKeyframes !== false;
    keyframes = [];
    for (const f of frames) {
      // sequential: the models serialise anyway, and this bounds memory
      // A frame that does not decode has no annotations; a model worker that died (offload.ts) fails the whole call.
      const ann = annotate ? await annotateImage(f.png, undefined, opts).catch((err: unknown) => (isMachineryFailure(err) ? Promise.reject(err) : null)) : null;
      keyframes.push({ index: f.index, timestamp_seconds: f.timestamp_seconds, width: f.width, height: f.height, annotations: ann });
    }
    if (!annotate) unavailable.keyframes = 'keyframe annotation switched off';
    else {
      // D58: a keyframe whose annotations are null says why (its frame did not decode).
      const failed = keyframes.filter((k) => !k.annotations).map((k) => k.index);
      if (failed.length) unavailable.keyframes = `keyframe ${failed.join(', ')} could not be annotated: the frame did not decode`;
    }
  } else {
    unavailable.scenes = unavailable.keyframes = p.has_video ? 'no duration: keyframes cannot be placed' : 'no video stream';
  }
  const objects = keyframes?.some((k) => k.annotations?.objects) ? objectsAcross(keyframes) : null;
  if (!objects) unavailable.objects = 'no keyframe was annotated';
  const faces = keyframes?.map((k) => k.annotations?.face_count).filter((n): n is number => typeof n === 'number') ?? [];
  if (!faces.length) unavailable.face_count_max = keyframes?.some((k) => k.annotations) ? 'faces were not counted on any keyframe' : 'no keyframe was annotated';
  const audio = await audioP;
  if (audioError && isMachineryFailure(audioError)) throw audioError; // D66: no verdict on the bytes
  const audioFailure = audioError ? `the sound track could not be measured: ${(audioError instanceof Error ? audioError.message : String(audioError)).slice(0, 300)}` : null;
  // D58: a sound-track figure that was not measured says why.
  if (!p.has_audio) unavailable.integrated_lufs = unavailable.mean_volume_db = unavailable.noise_level = 'no audio stream';
  else if (!audio) unavailable.integrated_lufs = unavailable.mean_volume_db = unavailable.noise_level = audioFailure ?? 'the sound track could not be measured';
  else {
    const loudnessWhy = audio.failures.loudness ? `loudness measurement failed: ${audio.failures.loudness}` : null;
    if (audio.loudness.integrated_lufs === null) unavailable.integrated_lufs = loudnessWhy ?? 'no loudness could be measured (the sound track is silent or too short)';
    if (audio.loudness.mean_volume_db === null) unavailable.mean_volume_db = loudnessWhy ?? 'no volume could be measured';
    if (!audio.noise?.noise_level) unavailable.noise_level = audio.failures.noise_level ? `noise measurement failed: ${audio.failures.noise_level}` : 'no noise level could be measured';
  }
  const models = new Set(keyframes?.map((k) => k.annotations?.annotation_model).filter((m): m is string => !!m));
  const sound = audioModel({ loudness: !!audio && !audio.failures.loudness, noise: !!audio?.noise });
  return {
    type: 'video',
    duration_seconds: p.duration_seconds,
    width: p.width,
    height: p.height,
    fps: p.fps,
    codec: p.codec,
    rotation: p.rotation,
    has_audio: p.has_audio,
    audio_codec: p.audio_codec,
    channels: p.channels,
    sample_rate: p.sample_rate,
    bit_rate: p.bit_rate,
    integrated_lufs: audio?.loudness.integrated_lufs ?? null,
    mean_volume_db: audio?.loudness.mean_volume_db ?? null,
    noise_level: audio?.noise?.noise_level ?? null,
    scenes,
    keyframes,
    objects,
    face_count_max: faces.length ? Math.max(...faces) : null,
    actions: null,
    transcript: null,
    language: null,
    speaker_count: null,
    // D58: only models that ran — keyframe models only when a keyframe was annotated.
    annotation_model: models.size ? `${sound}; keyframes: ${[...models].join(', ')}` : sound,
    unavailable,
  };
}

function objectsAcross(keyframes: KeyframeAnnotation[]): VideoAnnotations['objects'] {
  const by = new Map<string, { label: string; keyframe_indexes: number[]; max_confidence: number }>();
  for (const k of keyframes) {
    for (const o of k.annotations?.objects ?? []) {
      const e = by.get(o.label) ?? { label: o.label, keyframe_indexes: [], max_confidence: 0 };
      if (!e.keyframe_indexes.includes(k.index)) e.keyframe_indexes.push(k.index);
      e.max_confidence = round4(Math.max(e.max_confidence, o.confidence));
      by.set(o.label, e);
    }
  }
  return [...by.values()].sort((a, b) => b.keyframe_indexes.length - a.keyframe_indexes.length || b.max_confidence - a.max_confidence);
}
