/**
 * The speech part of audio and video annotations, filled at the verdict from the file's
 * transcription state (D54 fan-in, D58, D65): transcript, language, speaker count, and (audio)
 * topics, keywords and emotion tone. A field without a value is null with its reason in
 * `unavailable`; `annotation_model` gains the models that ran (Amazon Transcribe, the text model).
 * The transcript is the bounded one the transcription recorded (bound.ts); it is bounded again
 * here, which changes nothing on such a one and bounds and marks one recorded without the bound,
 * so no File or event copy is ever larger than TRANSCRIPT_MAX_BYTES.
 */
import { boundTranscript } from './bound';
import type { TranscriptionState } from './types';

/** Speech fields per annotation type. */
export const SPEECH_FIELDS = {
  audio: ['transcript', 'language', 'speaker_count', 'topics', 'keywords', 'emotion_tone'],
  video: ['transcript', 'language', 'speaker_count'],
} as const;

type Ann = Record<string, unknown> & { type?: string; annotation_model?: string; unavailable?: Record<string, string> };

export function withSpeech<T extends Ann | null>(annotations: T, state: TranscriptionState | undefined): T {
  if (!annotations || !state) return annotations;
  const type = annotations.type;
  if (type !== 'audio' && type !== 'video') return annotations;
  const fields = SPEECH_FIELDS[type];
  const out: Ann = { ...annotations, unavailable: { ...(annotations.unavailable ?? {}) } };
  const unavailable = out.unavailable!;
  if (state.status === 'pending') return annotations;
  if (state.status === 'unavailable' || state.status === 'failed') {
    for (const f of fields) {
      out[f] = null;
      unavailable[f] = state.reason;
    }
    return out as T;
  }
  const values: Record<string, unknown> = {
    transcript: state.speech.transcript ? boundTranscript(state.speech.transcript) : null,
    language: state.speech.language,
    speaker_count: state.speech.speaker_count,
    topics: state.derived.topics,
    keywords: state.derived.keywords,
    emotion_tone: state.derived.emotion_tone,
  };
  const reasons = { ...state.speech.unavailable, ...state.derived.unavailable };
  for (const f of fields) {
    out[f] = values[f] ?? null;
    if (out[f] === null) unavailable[f] = reasons[f] ?? 'not computed';
    else delete unavailable[f];
  }
  out.annotation_model = [annotations.annotation_model, ...state.models].filter(Boolean).join('; ');
  return out as T;
}
