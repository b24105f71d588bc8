/**
 * `transcribe` transcriber (deployed, D65): Amazon Transcribe batch jobs on the stored upload.
 *
 * Start: `StartTranscriptionJob` with the S3 object as media, language identification
 * (`IdentifyLanguage`), speaker diarization (`ShowSpeakerLabels`, up to 10 speakers) and the output
 * written to the media bucket under `transcripts/<job name>.json`. The job name carries the
 * submission, upload round and file (`jobNameFor`), so the completion event leads back to the file
 * and a repeated start of the same file answers ConflictException, taken as "already started".
 * Completion arrives as EventBridge's "Transcribe Job State Change" event (wiring rule
 * `transcription-done`), read by `functions/pipeline/transcribed.ts`.
 *
 * Output: `parseTranscribeOutput` reads the document Transcribe writes (results.transcripts,
 * results.items with alternatives/confidence/speaker_label, results.speaker_labels.speakers,
 * results.language_code): consecutive words of one speaker form a segment, a long turn continuing
 * in further segments of the same speaker once its text holds MAX_SEGMENT_CHARACTERS (so a
 * monologue, or a recording without speaker labels, is not one segment the inline bound could only
 * keep whole or drop: bound.ts); a segment's confidence is the mean of its words' confidences;
 * punctuation joins the word before it. The result is the whole transcript: what a file's
 * transcription stores of it is bounded (bound.ts `boundTranscript`).
 */
import type { StartTranscriptionJobCommandInput } from '@aws-sdk/client-transcribe';
import * as z from '../zod';
import type { SpeechResult, StartRequest, StartResult, Transcriber, TranscriptSegment } from './types';

import { BUCKET_PREFIXES, TRANSCRIBE_JOB_PREFIX } from '../manifest/wiring';
import { transcribeJobs } from '../aws/transcribe-jobs';

export { TRANSCRIBE_JOB_PREFIX };
export const TRANSCRIPT_PREFIX = BUCKET_PREFIXES.transcripts;
export const MAX_SPEAKERS = 10;
/** A segment whose text holds this many characters ends there: the next word, same speaker, starts another. */
export const MAX_SEGMENT_CHARACTERS = 1000;

/**
 * `media-<sub>.<round>.<file>` for a file's first job, `….t<n>` for the n-th (a job started again
 * after a provider failure; Transcribe allows [0-9a-zA-Z._-], up to 200 characters, and a name once).
 */
export function jobNameFor(subId: string, round: string, fileId: string, attempt = 1): string {
  return `${TRANSCRIBE_JOB_PREFIX}${subId}.${round}.${fileId}${attempt > 1 ? `.t${attempt}` : ''}`;
}

export function parseJobName(name: string): { subId: string; round: string; fileId: string; attempt: number } | null {
  const m = /^media-(sub_[0-9A-HJKMNP-TV-Z]{26})\.([A-Za-z0-9]+)\.(file_[0-9A-HJKMNP-TV-Z]{26})(?:\.t([1-9]\d{0,2}))?$/.exec(name);
  return m ? { subId: m[1]!, round: m[2]!, fileId: m[3]!, attempt: m[4] ? Number(m[4]) : 1 } : null;
}

/**
 * What a FAILED job's `FailureReason` says (docs/scoring.md, "Transcription"):
 * - the recording has no speech to identify a language in: `no_speech` (it was heard; the file is
 *   scored with no transcript, and the reason says so);
 * - the recording is one Transcribe cannot read (format, codec, channels, sample rate, size,
 *   duration, a file it cannot parse): `media`;
 * - anything else, an internal failure, throttling, an access error or no reason at all: `provider`
 *   (D66: a failure of the service, never held against the file; a new job is started).
 */
export function classifyTranscribeFailure(reason: string | null): 'no_speech' | 'media' | 'provider' {
  if (!reason) return 'provider';
  if (/internal|throttl|rate exceeded|limit exceeded|try again|unavailable|timed? ?out|access|denied|permission|authori[sz]|credential|kms|bucket/i.test(reason)) return 'provider';
  if (/speech|language/i.test(reason)) return 'no_speech';
  if (/unsupported|not supported|invalid|format|codec|channel|sample rate|sampling|parse|corrupt|too (short|long|large)|duration|file size|no audio/i.test(reason)) return 'media';
  return 'provider';
}

export const transcriptKeyFor = (jobName: string) => `${TRANSCRIPT_PREFIX}${jobName}.json`;

const MEDIA_FORMAT: Record<string, StartTranscriptionJobCommandInput['MediaFormat']> = {
  'audio/mpeg': 'mp3',
  'audio/wav': 'wav',
  'audio/mp4': 'm4a',
  'video/mp4': 'mp4',
};

/** The StartTranscriptionJob request for one upload (exposed for tests). */
export function startRequest(req: StartRequest): StartTranscriptionJobCommandInput {
  const format = MEDIA_FORMAT[req.contentType];
  return {
    TranscriptionJobName: req.jobName,
    Media: { MediaFileUri: `s3://${req.bucket}/${req.key}` },
    // QuickTime: Transcribe detects the container itself.
    ...(format ? { MediaFormat: format } : {}),
    IdentifyLanguage: true,
    Settings: { ShowSpeakerLabels: true, MaxSpeakerLabels: MAX_SPEAKERS },
    OutputBucketName: req.bucket,
    OutputKey: req.outputKey,
  };
}

/** What starts a job: shared/aws/transcribe-jobs.ts deployed (no SDK client), a stub in tests. */
export interface TranscribeClientLike {
  startTranscriptionJob(input: StartTranscriptionJobCommandInput): Promise<unknown>;
}

export class TranscribeTranscriber implements Transcriber {
  readonly name = 'transcribe' as const;
  constructor(private client?: TranscribeClientLike) {}

  async start(req: StartRequest): Promise<StartResult> {
    this.client ??= transcribeJobs();
    try {
      await this.client.startTranscriptionJob(startRequest(req));
    } catch (err) {
      // A redelivered scoring message starts the same file again: the job is already running.
      if ((err as Error).name !== 'ConflictException') throw err;
    }
    return { status: 'started', job_name: req.jobName };
  }
}

const num = z.union([z.number(), z.pipe(z.string().check(z.trim(), z.regex(/^-?\d+(\.\d+)?$/)), z.transform(Number))]);

/** The published Transcribe output document (the fields read here). */
export const TranscribeOutputSchema = z.object({
  jobName: z.optional(z.string()),
  status: z.optional(z.string()),
  results: z.object({
    transcripts: z._default(z.array(z.object({ transcript: z.string() })), []),
    items: z._default(
      z.array(
        z.object({
          type: z.enum(['pronunciation', 'punctuation']),
          start_time: z.optional(num),
          end_time: z.optional(num),
          speaker_label: z.optional(z.string()),
          alternatives: z.array(z.object({ content: z.string(), confidence: z.optional(num) })).check(z.minLength(1)),
        }),
      ),
      [],
    ),
    speaker_labels: z.optional(z.object({ speakers: z.optional(num) })),
    language_code: z.optional(z.string()),
  }),
});

const r3 = (n: number) => Math.round(n * 1000) / 1000;
const r4 = (n: number) => Math.round(n * 10000) / 10000;

/** Transcript, language and speaker count from a Transcribe output document. */
export function parseTranscribeOutput(doc: unknown): SpeechResult {
  const { results } = TranscribeOutputSchema.parse(doc);
  const unavailable: Record<string, string> = {};
  const segments: (TranscriptSegment & { confs: number[] })[] = [];
  for (const item of results.items) {
    const alt = item.alternatives[0]!;
    const last = segments[segments.length - 1];
    if (item.type === 'punctuation') {
      if (last) last.text += alt.content;
      continue;
    }
    const speaker = item.speaker_label ?? null;
    const start = item.start_time ?? last?.end_seconds ?? 0;
    const end = item.end_time ?? start;
    if (!last || last.speaker !== speaker || last.text.length >= MAX_SEGMENT_CHARACTERS) {
      segments.push({ start_seconds: r3(start), end_seconds: r3(end), speaker, text: alt.content, confidence: null, confs: [] });
    } else {
      last.text += ` ${alt.content}`;
      last.end_seconds = r3(end);
    }
    if (alt.confidence !== undefined) segments[segments.length - 1]!.confs.push(alt.confidence);
  }
  const out = segments.map(({ confs, ...s }) => ({ ...s, confidence: confs.length ? r4(confs.reduce((a, b) => a + b, 0) / confs.length) : null }));
  const fullText = results.transcripts.map((t) => t.transcript).join(' ').trim();
  const speech = out.length > 0;
  const labelled = new Set(out.map((s) => s.speaker).filter((s) => s !== null));
  const speakers = results.speaker_labels?.speakers !== undefined ? Number(results.speaker_labels.speakers) : labelled.size || null;
  const language = speech && results.language_code ? results.language_code.split('-')[0]!.toLowerCase() : null;
  if (!speech) unavailable.language = 'no speech in the recording';
  else if (!language) unavailable.language = 'Amazon Transcribe identified no language';
  return {
    transcript: { full_text: fullText, segments: out },
    language,
    speaker_count: speech ? speakers : 0,
    unavailable,
  };
}
