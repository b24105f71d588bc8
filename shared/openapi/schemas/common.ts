/**
 * Response pieces shared by every domain: timestamps, ids, the list wrapper and the error envelope
 * (D4, D41). Response objects are open (`looseObject`): a field added later does not break a client,
 * while every documented field is checked by the contract test (test/support/contract.ts).
 */
import * as z from 'zod';

export const ts = z.string().describe('ISO 8601 UTC timestamp with milliseconds, e.g. 2026-11-21T12:00:00.000Z');
export const tsOrNull = ts.nullable();
export const id = (prefix: string) => z.string().describe(`\`${prefix}_\` followed by a 26-character ULID`);
export const environment = z.enum(['live', 'test']);
export const cents = z.number().int();

/** `{object:'list', data, has_more, next_cursor}`: newest first, opaque cursor. */
export const list = <T extends z.ZodType>(item: T) =>
  z.looseObject({
    object: z.literal('list'),
    data: z.array(item),
    has_more: z.boolean(),
    next_cursor: z.string().nullable().describe('Pass as `cursor` to get the next page; null on the last page.'),
  });

export const errorDetail = z.looseObject({
  field: z.string().optional(),
  message: z.string(),
  code: z.string().optional(),
});

export const ERROR_TYPES = [
  'invalid_request',
  'authentication_error',
  'authorization_error',
  'not_found',
  'conflict',
  'rate_limit_exceeded',
  'validation_error',
  'insufficient_credits',
  'pricing_violation',
  'free_tier_job_limit',
  'idempotency_conflict',
  'service_unavailable',
  'internal_error',
] as const;

/** The one error shape of every failure; extra fields (e.g. `floor_cents`) sit inside `error`. */
export const errorEnvelope = z
  .strictObject({
    error: z.looseObject({
      type: z.enum(ERROR_TYPES),
      message: z.string(),
      request_id: z.string().describe('Equals the X-Request-Id response header.'),
      details: z.array(errorDetail).optional(),
    }),
  })
  .meta({ id: 'Error' });

/**
 * What the edge answers itself, before any function runs (shared/http/edge.ts): the firewall's
 * 413 for a body over 4 MiB has no `request_id`; API Gateway's own 502 and 504 carry its request
 * id (`req_<uuid>`, not a ULID). Neither sends X-Request-Id.
 */
export const edgeErrorEnvelope = z
  .strictObject({
    error: z.looseObject({
      type: z.enum(ERROR_TYPES),
      message: z.string(),
      request_id: z.string().optional().describe("API Gateway's request id (`req_<uuid>`), when API Gateway answered; absent from the firewall's answers."),
      details: z.array(errorDetail).optional(),
    }),
  })
  .meta({ id: 'EdgeError' });
