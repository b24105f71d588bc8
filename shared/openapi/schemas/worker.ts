/** Responses of the worker routes. */
import * as z from 'zod';
import { cents, id, ts, tsOrNull } from './common';
import { location } from './jobs';
import { SUBMISSION_STATUS, reasonCodes } from './files';

export const workerSignup = z.looseObject({
  worker: z.looseObject({ id: id('wkr'), name: z.string(), created_at: ts }),
  token: z.string().describe('`svc_wkr_…`: send as `Authorization: Bearer <token>`; shown once.'),
});

export const workerJob = z
  .looseObject({
    object: z.literal('worker_job'),
    id: id('job'),
    type: z.string(),
    title: z.string().nullable(),
    description: z.string(),
    accepted_formats: z.array(z.string()),
    files_per_submission: z.number().int(),
    worker_payout_per_file_cents: cents,
    min_duration_seconds: z.number().nullable(),
    max_duration_seconds: z.number().nullable(),
    min_width: z.number().int().nullable(),
    min_height: z.number().int().nullable(),
    worker_guidelines: z.string().nullable(),
    location,
    slots_available: z.number().int(),
    created_at: ts,
  })
  .meta({ id: 'WorkerJob' });

export const workerSubmission = z
  .looseObject({
    object: z.literal('submission'),
    id: id('sub'),
    job_id: z.string(),
    worker_id: z.string(),
    status: z.enum([...SUBMISSION_STATUS, 'withdrawn', 'expired', 'cancelled']),
    attempt: z.number().int().describe('1, or 2 for the retry of a `retry_pending` verdict'),
    files_expected: z.number().int(),
    reserved_until: tsOrNull,
    files: z
      .array(z.looseObject({ file_id: id('file'), filename: z.string().nullable().optional(), content_type: z.string(), size_bytes: z.number().int().nullable().optional() }))
      .describe('The files of the current upload round, as planned or sent'),
    upload_errors: z
      .array(z.looseObject({ file_id: id('file'), code: z.string(), message: z.string() }))
      .describe('Files of the round refused after they landed (e.g. bytes that are not the declared type); empty when none'),
    ai_star_rating: z.number().int().nullable().optional(),
    ai_reasoning: z.string().nullable().optional(),
    dimensions: z.looseObject({}).nullable().optional().describe('relevance, quality and instruction_compliance (1..5) as a model judged them; null before a verdict and when no model judged the files'),
    reason_codes: reasonCodes.nullable().optional(),
    payout_cents: cents.nullable().optional().describe('What the approval paid the worker; null until approved'),
    submitted_at: tsOrNull.optional(),
    scored_at: tsOrNull.optional(),
    override: z
      .looseObject({ decision: z.enum(['approve', 'reject']), reason_code: z.string().nullable().optional(), overridden_at: ts.optional() })
      .nullable()
      .optional()
      .describe("The buyer's override of the verdict, or null (the buyer's note is not shown)"),
    created_at: ts.optional(),
  })
  .meta({ id: 'WorkerSubmission' });

export const presignedUploads = z.looseObject({
  uploads: z.array(
    z.looseObject({
      url: z.string(),
      method: z.string(),
      headers: z.record(z.string(), z.string()).optional(),
      fields: z.record(z.string(), z.string()).optional(),
      expires_at: ts,
    }),
  ),
});
