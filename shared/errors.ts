/**
 * Typed domain errors. Domain code throws these; one middleware maps them to the error envelope
 * (D4): `{error: {type, message, request_id, details?, ...extras}}` (extras inside `error`, D41).
 */
export type ErrorType =
  | 'invalid_request'
  | 'authentication_error'
  | 'authorization_error'
  | 'not_found'
  | 'conflict'
  | 'rate_limit_exceeded'
  | 'validation_error'
  | 'insufficient_credits'
  | 'pricing_violation'
  | 'free_tier_job_limit'
  | 'idempotency_conflict'
  | 'service_unavailable'
  | 'internal_error';

export interface ErrorDetail {
  field?: string;
  message: string;
  code?: string;
}

/** At most this many details are listed (a body with 100,000 unknown fields gets 50 and a count). */
export const MAX_ERROR_DETAILS = 50;
/** A field name or message in a detail is cut to this many characters (a field name may be a megabyte). */
const MAX_DETAIL_TEXT = 300;

const cut = (s: string) => (s.length > MAX_DETAIL_TEXT ? `${s.slice(0, MAX_DETAIL_TEXT - 1)}…` : s);

/**
 * The details an error answers with, bounded: the answer must fit in a function's response (6 MB)
 * and its stored copy in an idempotency record (DynamoDB's 400 KB item), however large the input.
 */
function boundedDetails(details: ErrorDetail[] | undefined): ErrorDetail[] | undefined {
  if (!details) return details;
  const listed = details.slice(0, details.length > MAX_ERROR_DETAILS ? MAX_ERROR_DETAILS - 1 : MAX_ERROR_DETAILS).map((d) => ({
    ...d,
    ...(d.field !== undefined ? { field: cut(d.field) } : {}),
    message: cut(d.message),
  }));
  if (details.length > listed.length) listed.push({ message: `${details.length - listed.length} more errors are not listed.`, code: 'more_errors' });
  return listed;
}

export class ApiError extends Error {
  readonly details?: ErrorDetail[];
  constructor(
    readonly status: number,
    readonly type: ErrorType,
    message: string,
    details?: ErrorDetail[],
    /** Extra fields placed inside `error` (D41), e.g. floor_cents. */
    readonly extra?: Record<string, unknown>,
    /** Extra response headers, e.g. Retry-After. */
    readonly headers?: Record<string, string>,
  ) {
    super(message);
    this.name = 'ApiError';
    this.details = boundedDetails(details);
  }
}

export const errors = {
  invalidRequest: (message: string, details?: ErrorDetail[]) => new ApiError(400, 'invalid_request', message, details),
  validation: (message: string, details?: ErrorDetail[]) => new ApiError(400, 'validation_error', message, details),
  /** Fields valid one by one but not together (D4). */
  unprocessable: (message: string, details?: ErrorDetail[]) => new ApiError(422, 'validation_error', message, details),
  authentication: (message = 'A valid API key is required: send Authorization: Bearer <key>.') =>
    new ApiError(401, 'authentication_error', message),
  authorization: (message: string) => new ApiError(403, 'authorization_error', message),
  notFound: (what = 'resource', id?: string) =>
    new ApiError(404, 'not_found', id ? `No such ${what}: ${id}` : `No such ${what}.`),
  conflict: (message: string, details?: ErrorDetail[], headers?: Record<string, string>) =>
    new ApiError(409, 'conflict', message, details, undefined, headers),
  idempotencyConflict: () =>
    new ApiError(
      409,
      'idempotency_conflict',
      'This Idempotency-Key was already used with a different method, path or body.',
      [{ field: 'Idempotency-Key', message: 'key reused with a different request', code: 'idempotency_key_reused' }],
    ),
  rateLimited: (retryAfterSeconds: number) =>
    new ApiError(429, 'rate_limit_exceeded', `Rate limit exceeded; retry after ${retryAfterSeconds} seconds.`, undefined, undefined, {
      'Retry-After': String(retryAfterSeconds),
    }),
  /** A capability this deployment has not configured (e.g. payments); retrying later may succeed. */
  unavailable: (message: string, code: string, retryAfterSeconds?: number) =>
    new ApiError(503, 'service_unavailable', message, [{ message, code }], undefined, retryAfterSeconds !== undefined ? { 'Retry-After': String(retryAfterSeconds) } : undefined),
  internal: () => new ApiError(500, 'internal_error', 'An unexpected error occurred. It has been logged; retrying is safe.'),
};

/**
 * Other writers kept winning: a transaction still met `TransactionConflict` (or an idempotent
 * transaction still in progress) after its bounded, jittered retries. Nothing was written; the
 * caller may retry (mapped to 409 `conflict` with Retry-After, never a 500).
 */
export class Contention extends Error {
  constructor(readonly attempts: number) {
    super(`transaction contention after ${attempts} attempts`);
    this.name = 'Contention';
  }
}

/** A failed DynamoDB condition that is a business outcome, not a fault (logged at info). */
export class ConditionFailed extends Error {
  constructor(readonly reasons: (string | undefined)[]) {
    super(`condition failed: ${reasons.join(',')}`);
    this.name = 'ConditionFailed';
  }
}
