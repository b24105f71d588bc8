/**
 * Every non-2xx answer becomes a typed exception carrying the service's error envelope
 * `{error: {type, message, request_id, details?, …extras}}`.
 */
export interface ErrorDetail {
  field?: string;
  message: string;
  code?: string;
}

export interface ErrorEnvelope {
  error: { type: string; message: string; request_id: string; details?: ErrorDetail[]; [extra: string]: unknown };
}

export class MarketplaceError extends Error {
  override name = 'MarketplaceError';
  /** HTTP status (0 when no answer came). */
  readonly status: number;
  /** The envelope's `type`, e.g. `validation_error`. */
  readonly type: string;
  readonly requestId: string | null;
  readonly details: ErrorDetail[];
  /** The whole envelope as the service sent it (extras such as `floor_cents` inside `error`). */
  readonly envelope: ErrorEnvelope | null;
  readonly headers: Record<string, string>;

  constructor(status: number, envelope: ErrorEnvelope | null, headers: Record<string, string> = {}, fallbackMessage = 'request failed') {
    super(envelope?.error.message ?? fallbackMessage);
    this.status = status;
    this.type = envelope?.error.type ?? 'unknown';
    this.requestId = envelope?.error.request_id ?? headers['x-request-id'] ?? null;
    this.details = envelope?.error.details ?? [];
    this.envelope = envelope;
    this.headers = headers;
  }

  /** `details[0].code`, e.g. `idempotency_key_in_use`. */
  get code(): string | undefined {
    return this.details[0]?.code;
  }

  /** Seconds the service asked to wait before trying again (Retry-After), or null. */
  get retryAfterSeconds(): number | null {
    const v = Number(this.headers['retry-after']);
    return this.headers['retry-after'] !== undefined && Number.isFinite(v) ? v : null;
  }
}

export class InvalidRequestError extends MarketplaceError { override name = 'InvalidRequestError'; }
export class ValidationError extends MarketplaceError { override name = 'ValidationError'; }
export class PricingViolationError extends MarketplaceError { override name = 'PricingViolationError'; }
export class AuthenticationError extends MarketplaceError { override name = 'AuthenticationError'; }
export class AuthorizationError extends MarketplaceError { override name = 'AuthorizationError'; }
export class FreeTierJobLimitError extends MarketplaceError { override name = 'FreeTierJobLimitError'; }
export class InsufficientCreditsError extends MarketplaceError { override name = 'InsufficientCreditsError'; }
export class NotFoundError extends MarketplaceError { override name = 'NotFoundError'; }
export class ConflictError extends MarketplaceError { override name = 'ConflictError'; }
export class IdempotencyConflictError extends MarketplaceError { override name = 'IdempotencyConflictError'; }
export class RateLimitError extends MarketplaceError {
  override name = 'RateLimitError';
}
/** 503: a capability is off on this deployment, or a capacity is full (`long_polls_full`, with Retry-After). */
export class ServiceUnavailableError extends MarketplaceError { override name = 'ServiceUnavailableError'; }
export class InternalError extends MarketplaceError { override name = 'InternalError'; }
/** What a ConnectionError knows of the call it ended, to retry it safely. */
export interface ConnectionErrorInfo {
  method?: string;
  path?: string;
  /** The key every attempt of this POST sent: send it again to retry without acting twice. */
  idempotencyKey?: string;
  /** The status of an answer whose body was cut off (the service did answer, and may have acted), else null. */
  answeredStatus?: number | null;
}

/**
 * No (whole) HTTP answer: connection refused or reset, DNS failure, time-out, or the connection
 * lost while the answer's body was read.
 */
export class ConnectionError extends MarketplaceError {
  override name = 'ConnectionError';
  readonly method: string | undefined;
  readonly path: string | undefined;
  readonly idempotencyKey: string | undefined;
  readonly answeredStatus: number | null;
  constructor(message: string, override readonly cause?: unknown, info: ConnectionErrorInfo = {}) {
    super(0, null, {}, message);
    this.method = info.method;
    this.path = info.path;
    this.idempotencyKey = info.idempotencyKey;
    this.answeredStatus = info.answeredStatus ?? null;
  }
}

const BY_TYPE: Record<string, new (s: number, e: ErrorEnvelope | null, h: Record<string, string>) => MarketplaceError> = {
  invalid_request: InvalidRequestError,
  validation_error: ValidationError,
  pricing_violation: PricingViolationError,
  authentication_error: AuthenticationError,
  authorization_error: AuthorizationError,
  free_tier_job_limit: FreeTierJobLimitError,
  insufficient_credits: InsufficientCreditsError,
  not_found: NotFoundError,
  conflict: ConflictError,
  idempotency_conflict: IdempotencyConflictError,
  rate_limit_exceeded: RateLimitError,
  service_unavailable: ServiceUnavailableError,
  internal_error: InternalError,
};

export function errorFromResponse(status: number, body: unknown, headers: Record<string, string>): MarketplaceError {
  const env = isEnvelope(body) ? body : null;
  const Cls = (env && BY_TYPE[env.error.type]) ?? (status >= 500 ? InternalError : MarketplaceError);
  return new Cls(status, env, headers);
}

function isEnvelope(b: unknown): b is ErrorEnvelope {
  const e = (b as { error?: { type?: unknown; message?: unknown } } | null)?.error;
  return typeof e?.type === 'string' && typeof e.message === 'string';
}
