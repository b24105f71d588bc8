/** Responses of the job routes. */
import * as z from 'zod';
import { cents, environment, id, ts, tsOrNull } from './common';

export const location = z
  .looseObject({
    city: z.string().nullable(),
    state: z.string().nullable(),
    latitude: z.number().nullable(),
    longitude: z.number().nullable(),
    radius_km: z.number().nullable(),
    description: z.string().nullable(),
  })
  .nullable();

export const submissionSummary = z
  .looseObject({
    object: z.literal('submission_summary'),
    total_submissions: z.number().int(),
    approved: z.number().int(),
    rejected: z.number().int(),
    approval_rate: z.number().min(0).max(1).nullable().describe('approved / (approved + rejected); null when nothing is scored'),
    avg_ai_star_rating: z.number().nullable(),
    by_type: z.array(
      z.looseObject({
        type: z.enum(['image', 'audio', 'video']),
        total: z.number().int(),
        approved: z.number().int(),
        avg_ai_star_rating: z.number().nullable(),
      }),
    ),
  })
  .meta({ id: 'SubmissionSummary' });

export const JOB_STATUS = ['open', 'filled', 'in_progress', 'completed', 'cancelled'] as const;

export const job = z
  .looseObject({
    id: id('job'),
    object: z.literal('job'),
    organization_id: z.string(),
    environment,
    type: z.enum(['data_collection', 'feedback']),
    title: z.string().nullable(),
    description: z.string(),
    status: z.enum(JOB_STATUS),
    files_needed: z.number().int(),
    files_approved: z.number().int(),
    files_remaining: z.number().int(),
    files_per_submission: z.number().int(),
    accepted_formats: z.array(z.string()),
    price_per_file_cents: cents,
    platform_fee_pct: z.number(),
    total_cost_cents: cents,
    worker_payout_per_file_cents: cents,
    scoring_criteria: z.string().nullable(),
    min_star_rating: z.number().int(),
    min_duration_seconds: z.number().int().min(1).max(600).nullable(),
    max_duration_seconds: z.number().int().min(1).max(600).nullable(),
    min_width: z.number().int().nullable(),
    min_height: z.number().int().nullable(),
    worker_guidelines: z.string().nullable(),
    location,
    metadata: z.record(z.string(), z.unknown()),
    buyer_rating: z.number().int().optional().describe('Present once the job is rated.'),
    buyer_feedback: z.string().nullable().optional(),
    created_at: ts,
    completed_at: tsOrNull,
    cancelled_at: tsOrNull,
  })
  .meta({ id: 'Job' });

export const jobWithSummary = job.extend({ submission_summary: submissionSummary }).meta({ id: 'JobWithSummary' });
