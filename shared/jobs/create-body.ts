/**
 * The create-job body schema, with every bound of the spec's table (D4: 400 with details[].field)
 * and the formats of D15. Kept apart from the rules in ./validation so that only the create route
 * loads zod and builds these schemas at module load.
 */
import * as z from '../zod';
import { FORMATS, canonicalFormat } from './validation';

const int = (min: number, max: number) => z.int().check(z.gte(min), z.lte(max));
const optional = <T extends z.core.SomeType>(t: T) => z.optional(z.nullable(t));

const location = z.strictObject({
  city: optional(z.string().check(z.trim(), z.minLength(1), z.maxLength(100))),
  state: optional(z.string().check(z.trim(), z.minLength(1), z.maxLength(100))),
  latitude: optional(z.number().check(z.gte(-90), z.lte(90), z.storable())),
  longitude: optional(z.number().check(z.gte(-180), z.lte(180), z.storable())),
  radius_km: optional(z.number().check(z.gte(0.1), z.lte(500))),
  description: optional(z.string().check(z.maxLength(500))),
});

/**
 * Metadata numbers are stored as DynamoDB numbers and echoed as JSON: only values every JSON
 * reader takes exactly (|n| ≤ 2^53 − 1) and the table can store (non-zero |n| ≥ 1e-130) are
 * accepted; others are a validation error on the field (issue 11.4), never a failed write.
 */
const metadataNumber = z
  .number()
  .check(
    z.gte(-Number.MAX_SAFE_INTEGER, { message: `Metadata numbers must be between -${Number.MAX_SAFE_INTEGER} and ${Number.MAX_SAFE_INTEGER}; send larger values as strings.` }),
    z.lte(Number.MAX_SAFE_INTEGER, { message: `Metadata numbers must be between -${Number.MAX_SAFE_INTEGER} and ${Number.MAX_SAFE_INTEGER}; send larger values as strings.` }),
    z.refine((n) => n === 0 || Math.abs(n) >= 1e-130, { message: 'This number is too close to zero to store; send it as a string.' }),
  );
const metadataValue = z.union([z.string().check(z.maxLength(500)), metadataNumber, z.boolean(), z.null()]);

export const createJobBody = z.strictObject({
  type: z.enum(['data_collection', 'feedback']),
  title: optional(z.string().check(z.maxLength(100))),
  description: z.string().check(z.minLength(10), z.maxLength(5000)),
  files_needed: int(1, 10_000),
  files_per_submission: optional(int(1, 5)),
  scoring_criteria: optional(z.string().check(z.maxLength(1000))),
  min_star_rating: optional(int(1, 5)),
  min_duration_seconds: optional(int(1, 600)),
  max_duration_seconds: optional(int(1, 600)),
  min_width: optional(int(1, 20_000)),
  min_height: optional(int(1, 20_000)),
  worker_guidelines: optional(z.string().check(z.maxLength(2000))),
  accepted_formats: z
    .array(z.string().check(z.refine((s) => canonicalFormat(s) !== null, { message: `Not an accepted MIME type; use one of ${FORMATS.join(', ')} (audio/x-m4a is accepted as audio/mp4).` })))
    .check(z.minLength(1), z.maxLength(8)),
  // Bounds of the price are business rules with their own error (D14: pricing_violation).
  // Any integer: one above the maximum (however large) is a pricing_violation naming the limits, not a number-range error.
  price_per_file_cents: z.number().check(z.refine(Number.isInteger, { message: 'Expected an integer number of cents.' })),
  location: optional(location),
  metadata: optional(
    z
      .record(z.string().check(z.minLength(1), z.maxLength(40)), metadataValue)
      .check(z.refine((m) => Object.keys(m).length <= 50, { message: 'At most 50 metadata keys.' })),
  ),
});
export type CreateJobInput = z.infer<typeof createJobBody>;
