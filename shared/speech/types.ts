/**
 * Speech (D65): the transcriber interface and the shapes a transcript takes in the annotations.
 *
 * A transcriber starts the transcription of one stored upload. `transcribe` (Amazon Transcribe,
 * deployed) answers `started` and its result arrives later through EventBridge; `local` answers
 * `unavailable` with the reason, because no offline speech recogniser exists here
 * (offline-media.md), so the speech fields stay null with that reason (D58).
 */

export interface TranscriptSegment {
  start_seconds: number;
  end_seconds: number;
  /** the diarization label (`spk_0`, `spk_1`, …), null when speakers were not told apart */
  speaker: string | null;
  text: string;
  /** mean confidence 0..1 of the segment's words as the recogniser gave them */
  confidence: number | null;
}

export interface Transcript {
  full_text: string;
  segments: TranscriptSegment[];
  /**
   * The bound on what is stored inline (bound.ts `boundTranscript`, `TRANSCRIPT_MAX_BYTES`): true
   * when only the first segments are kept (`full_text` is then their text). Set on every transcript
   * a file's transcription records; absent on a transcript as parsed, before the bound.
   */
  truncated?: boolean;
  /** segments of the whole transcript (equal to `segments.length` when not truncated) */
  total_segments?: number;
  /** characters (Unicode code points) of the whole transcript's text */
  total_characters?: number;
  /** where the whole transcript's last segment ends, in seconds; null when there is no speech */
  total_end_seconds?: number | null;
}

/** What the recogniser measured. A field it could not give is null with the reason. */
export interface SpeechResult {
  transcript: Transcript;
  /** ISO 639-1 (`en`), null when no language was identified */
  language: string | null;
  speaker_count: number | null;
  unavailable: Record<string, string>;
}

/** What the text model derived from the transcript. */
export interface SpeechDerived {
  topics: string[] | null;
  keywords: string[] | null;
  emotion_tone: EmotionTone | null;
  model: string | null;
  unavailable: Record<string, string>;
}

export const EMOTION_TONES = ['neutral', 'positive', 'negative', 'mixed'] as const;
export type EmotionTone = (typeof EMOTION_TONES)[number];

/**
 * Why a Transcribe job gave no transcript (shared/speech/transcribe.ts `classifyTranscribeFailure`):
 * the service failed or lost the job (`provider`: a new job is started, D66), or the recording is
 * one Transcribe cannot read (`media`).
 */
export type TranscribeFailureCause = 'provider' | 'media';

/**
 * The transcription state of one uploaded file (`parts[file].transcription`). `attempt`: which job
 * of the file this is (1 unless a provider failure started another; absent on records before it).
 */
export type TranscriptionState =
  | { status: 'pending'; provider: 'transcribe'; job_name: string; started_at: string; attempt?: number }
  | { status: 'completed'; provider: 'transcribe'; job_name: string; speech: SpeechResult; derived: SpeechDerived; models: string[] }
  | { status: 'failed'; provider: 'transcribe'; job_name: string; attempt: number; cause: TranscribeFailureCause; reason: string; failed_at: string }
  | { status: 'unavailable'; reason: string };

export interface StartRequest {
  bucket: string;
  /** the upload's object key */
  key: string;
  /** the job name (`transcriptionJobName`), unique per file and upload round */
  jobName: string;
  /** where the output JSON goes (same bucket) */
  outputKey: string;
  /** content type of the upload (its media format) */
  contentType: string;
}

export type StartResult = { status: 'started'; job_name: string } | { status: 'unavailable'; reason: string };

export interface Transcriber {
  readonly name: 'local' | 'transcribe';
  start(req: StartRequest): Promise<StartResult>;
}
