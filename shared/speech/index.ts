/**
 * Speech entry points (D65). `transcriberFor`: env TRANSCRIBER (`local` | `transcribe`) wins;
 * otherwise `transcribe` on AWS and `local` under the embedded runtime (which has no speech model
 * and gets no Transcribe events).
 */
import { LocalTranscriber } from './local';
import { TranscribeTranscriber } from './transcribe';
import type { Transcriber } from './types';

export * from './types';
export { LocalTranscriber, SPEECH_UNAVAILABLE } from './local';
export { TranscribeTranscriber, classifyTranscribeFailure, jobNameFor, parseJobName, parseTranscribeOutput, startRequest, MAX_SEGMENT_CHARACTERS, transcriptKeyFor, TRANSCRIBE_JOB_PREFIX, TRANSCRIPT_PREFIX } from './transcribe';
export { deriveFromTranscript, derivationRequest, setSpeechModelClient, SpeechDerivedSchema, NO_SPEECH } from './derive';
export { withSpeech, SPEECH_FIELDS } from './annotate';
export { boundTranscript, TRANSCRIPT_MAX_BYTES, type BoundedTranscript } from './bound';

let override: (() => Transcriber) | null = null;
/** Tests: inject a transcriber (e.g. the Transcribe adapter over a stub client). */
export function setTranscriberFactory(f: (() => Transcriber) | null): void {
  override = f;
}

export function transcriberFor(runtime: 'local' | 'aws'): Transcriber {
  if (override) return override();
  const name = (process.env.TRANSCRIBER ?? '').trim().toLowerCase();
  if (name === 'local') return new LocalTranscriber();
  if (name === 'transcribe') return new TranscribeTranscriber();
  if (name) throw new Error(`TRANSCRIBER must be local or transcribe, not ${JSON.stringify(name)}`);
  return runtime === 'local' ? new LocalTranscriber() : new TranscribeTranscriber();
}
