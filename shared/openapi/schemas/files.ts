/** Responses of the file and submission routes (buyer side). */
import * as z from 'zod';
import { id, ts, tsOrNull } from './common';
import { REASON_CODES } from '../../scoring/types';

/** Why a verdict is what it is (docs/scoring.md); `[]` when approved, null before any verdict. */
export const reasonCodes = z
  .array(z.enum(REASON_CODES))
  .nullable()
  .describe('Why the verdict is what it is: [] when approved; what fell short otherwise; null while there is no verdict, and for a submission that the cancellation of its job ended before any verdict');

export const keyframe = z.looseObject({
  index: z.number().int(),
  timestamp_seconds: z.number().nullable(),
  width: z.number().int().nullable(),
  height: z.number().int().nullable(),
  perceptual_hash: z.string().nullable().optional().describe('64-bit perceptual hash of the frame, 16 hex characters'),
  download_url: z.string(),
  download_url_expires_at: ts,
});

export const transcriptSegment = z.looseObject({
  start_seconds: z.number(),
  end_seconds: z.number(),
  speaker: z.string().nullable().describe('Diarization label (spk_0, spk_1, ...); null when speakers were not told apart'),
  text: z.string(),
  confidence: z.number().min(0).max(1).nullable().describe('Mean confidence of the segment words'),
});

/** The speech of audio and video annotations (docs/annotations.md, "Long transcripts"). */
export const transcript = z
  .looseObject({
    full_text: z.string().describe('The whole text; when truncated, the text of the segments kept, separated by spaces'),
    segments: z.array(transcriptSegment).describe('In time order; one per turn of one speaker, a turn longer than 1,000 characters continuing in further segments'),
    truncated: z
      .boolean()
      .optional()
      .describe('true when the transcript is longer than its 32 KiB bound and only its first segments are here; false when it is whole'),
    total_segments: z.number().int().optional().describe('Segments of the whole transcript'),
    total_characters: z.number().int().optional().describe('Characters of the whole transcript text'),
    total_end_seconds: z.number().nullable().optional().describe('Where the last segment of the whole transcript ends; null when there is no speech'),
  })
  .describe('At most 32 KiB of JSON: a longer transcript keeps its first segments, whole, with truncated true and the counts of the whole transcript')
  .meta({ id: 'Transcript' });

export const file = z
  .looseObject({
    object: z.literal('file'),
    id: id('file'),
    job_id: z.string(),
    submission_id: z.string(),
    original_filename: z.string(),
    content_type: z.string(),
    size_bytes: z.number().int(),
    duration_seconds: z.number().nullable(),
    width: z.number().int().nullable(),
    height: z.number().int().nullable(),
    content_hash: z.string().describe('`sha256:` followed by the hex SHA-256 of the bytes'),
    captured_at: tsOrNull,
    ai_star_rating: z.number().int().min(1).max(5),
    device_info: z.looseObject({}).nullable(),
    worker_region: z.string().nullable(),
    perceptual_hash: z
      .string()
      .nullable()
      .optional()
      .describe('64-bit perceptual hash of an image, 16 hex characters (near-copies differ in at most 9 bits); null for audio and video (keyframes carry theirs)'),
    location_verified: z
      .boolean()
      .nullable()
      .optional()
      .describe("true: GPS inside the job's radius; false: the file has no GPS; null: the job has no point and radius"),
    download_url: z.string().describe('Signed URL, valid until download_url_expires_at (7 days)'),
    download_url_expires_at: ts,
    annotations: z
      .looseObject({ transcript: transcript.nullable().optional().describe('Audio and video: the speech, bounded to 32 KiB (truncated says whether it is whole); null with its reason in unavailable when there is none') })
      .nullable()
      .describe('Labels by content type (see docs/annotations.md); null for policy violations. An audio or video transcript is at most 32 KiB: a longer one keeps its first segments, marked truncated; an image\'s text_extraction likewise keeps its first words'),
    keyframes: z.array(keyframe).nullable(),
    created_at: ts,
  })
  .meta({ id: 'File' });

export const SUBMISSION_STATUS = ['awaiting_upload', 'pending_score', 'approved', 'rejected', 'retry_pending'] as const;
/** What a buyer sees: a submission still awaiting its upload is never listed nor shown to the buyer (D24). */
export const BUYER_SUBMISSION_STATUS = ['pending_score', 'approved', 'rejected', 'retry_pending'] as const;

export const submission = z
  .looseObject({
    id: id('sub'),
    object: z.literal('submission'),
    job_id: z.string(),
    worker_id: z.string(),
    status: z.enum(BUYER_SUBMISSION_STATUS),
    ai_star_rating: z.number().int().min(1).max(5).nullable(),
    ai_reasoning: z.string().nullable(),
    dimensions: z.looseObject({}).nullable().describe('relevance, quality and instruction_compliance (1..5) as a model judged them; null before a verdict and when no model judged the file (a pre-check rejection, a cancellation)'),
    reason_codes: reasonCodes.optional(),
    file_url: z.string().nullable(),
    file_ids: z.array(z.string()),
    content_type: z.string().nullable(),
    size_bytes: z.number().int().nullable(),
    files_count: z.number().int(),
    submitted_at: tsOrNull,
    scored_at: tsOrNull,
    override: z
      .looseObject({
        decision: z.enum(['approve', 'reject']),
        reason_code: z.string().nullable(),
        note: z.string().nullable(),
        overridden_at: ts,
      })
      .nullable()
      .optional()
      .describe("The buyer's override of the verdict, or null"),
  })
  .meta({ id: 'Submission' });
