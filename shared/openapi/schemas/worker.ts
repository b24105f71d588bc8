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
    files_expected: z.number().int(),
    reserved_until: tsOrNull,
    ai_star_rating: z.number().int().nullable().optional(),
    ai_reasoning: z.string().nullable().optional(),
    reason_codes: reasonCodes.optional(),
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
