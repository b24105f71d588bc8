/** `local` transcriber: says honestly that no speech recogniser runs here (D58, D65). */
import type { StartResult, Transcriber } from './types';

export const SPEECH_UNAVAILABLE = 'no offline speech model is available to the local runtime; Amazon Transcribe computes this when deployed';

export class LocalTranscriber implements Transcriber {
  readonly name = 'local' as const;
  async start(): Promise<StartResult> {
    return { status: 'unavailable', reason: SPEECH_UNAVAILABLE };
  }
}
