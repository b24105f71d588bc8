import { messageConsumer } from '../../shared/work/consumer';
import { parseTranscribeEvent, transcriptionDone } from '../../shared/work/transcription';

/** Queue `transcription` (D65): Amazon Transcribe finished a job → transcript into the file, scoring resumes. */
export const handler = messageConsumer('transcription', parseTranscribeEvent, transcriptionDone);
