/** Responses of the dataset export routes (D73). */
import * as z from 'zod';
import { id, ts, tsOrNull } from './common';

export const exportObject = z
  .looseObject({
    object: z.literal('export'),
    id: id('exp'),
    job_id: z.string(),
    format: z.enum(['jsonl', 'coco', 'csv']),
    status: z.enum(['pending', 'running', 'succeeded', 'failed']).describe('Moves pending → running → succeeded or failed, never back'),
    file_count: z.number().int().nullable().describe('Files in the export (COCO: images); null until it succeeded'),
    size_bytes: z.number().int().nullable().describe('Size of the export file; null until it succeeded'),
    download_url: z.string().nullable().describe('Signed URL valid 7 days (never past the export file\'s 30-day retention), fresh on every read; null until it succeeded and after its retention'),
    download_url_expires_at: tsOrNull,
    error: z.looseObject({ code: z.string(), message: z.string() }).nullable().describe('Why it failed; null otherwise'),
    created_at: ts,
    completed_at: tsOrNull,
  })
  .meta({ id: 'Export' });
