/**
 * What the edge in front of the functions answers by itself, written once for the stack and the
 * local HTTP front, so the two cannot drift:
 * - API Gateway's gateway responses (lib/api.ts renders each as a response template; local/http.ts
 *   answers the same bytes where API Gateway would answer them: a function error, a function or
 *   integration time-out, a response over Lambda's 6 MB);
 * - the web ACL's fixed bodies (lib/edges/waf.ts) and the size rules of AWS's core rule set that
 *   block a request before API Gateway routes it (a query string over 2,048 bytes, a URI path over
 *   1,024 bytes), which the local front enforces the same way.
 *
 * No function runs for these answers, so none of them has a `req_<ULID>` request id or an
 * X-Request-Id header (D4 is kept by every answer a function gives, the unknown route's included,
 * functions/edge/not-found.ts). A gateway response carries API Gateway's own request id
 * (`req_<uuid>` in the body, the bare uuid in `x-amzn-RequestId`); a web ACL body carries none.
 */
import { randomUUID } from 'node:crypto';
import type { ApiError, ErrorType } from '../errors';
import { ROUTES } from '../manifest/routes';

/** The stage of the REST API: the manifest paths start with `/v1`, so it is not named `v1`. */
export const STAGE_NAME = 'api';

/** One gateway response of the REST API (lib/api.ts `addGatewayResponses`). */
export interface GatewayResponseDef {
  /** Its construct id in lib/api.ts (part of a logical id: renaming it replaces the resource). */
  readonly id: string;
  /** API Gateway's response type (the name of `apigw.ResponseType`). */
  readonly responseType: 'MISSING_AUTHENTICATION_TOKEN' | 'THROTTLED' | 'WAF_FILTERED' | 'INTEGRATION_TIMEOUT' | 'DEFAULT_4XX' | 'DEFAULT_5XX';
  /** The status it answers with; none: API Gateway's own (the defaults keep 413, 415, 502, ...). */
  readonly status?: number;
  readonly type: ErrorType;
  /** The message; none: API Gateway's own (`$context.error.messageString`). */
  readonly message?: string;
  /** Static response headers (values as sent, unquoted). */
  readonly headers?: Readonly<Record<string, string>>;
}

const gatewayResponses = <K extends string>(t: Record<K, GatewayResponseDef>): Readonly<Record<K, GatewayResponseDef>> => t;

/** The REST API's gateway responses: the D4 envelope with API Gateway's request id. */
export const GATEWAY_RESPONSES = gatewayResponses({
  /**
   * An unknown path or method that no ANY method catches (every API resource has one, integrated
   * with the not-found function): the fallback. API Gateway's own answer would be 403 "Missing
   * Authentication Token".
   */
  unknownRoute: { id: 'UnknownRoute', responseType: 'MISSING_AUTHENTICATION_TOKEN', status: 404, type: 'not_found', message: 'No such route.' },
  throttled: { id: 'Throttled', responseType: 'THROTTLED', status: 429, type: 'rate_limit_exceeded', headers: { 'Retry-After': '1' } },
  /** The web ACL's managed rules (its rate-based and body rules answer their own bodies, lib/edges/waf.ts). */
  wafBlocked: { id: 'WafBlocked', responseType: 'WAF_FILTERED', status: 403, type: 'authorization_error', message: 'The request was blocked by the firewall.' },
  /** API Gateway gave up waiting for the function (29 s; a long poll's budget): 504. */
  integrationTimeout: { id: 'IntegrationTimeout', responseType: 'INTEGRATION_TIMEOUT', type: 'internal_error', message: 'The request timed out.' },
  default4xx: { id: 'Default4xx', responseType: 'DEFAULT_4XX', type: 'invalid_request' },
  /** A function that threw, timed out (28 s) or answered over 6 MB: API Gateway's 502. */
  default5xx: { id: 'Default5xx', responseType: 'DEFAULT_5XX', type: 'internal_error', message: 'Internal error.' },
});

/** An answer of the edge itself, as the local front writes it. */
export interface EdgeAnswer {
  status: number;
  headers: Record<string, string>;
  body: string;
}

/**
 * The response template lib/api.ts gives a gateway response: the envelope with API Gateway's
 * request id. `$context.error.messageString` is API Gateway's message already quoted as a JSON string.
 */
export function gatewayResponseTemplate(def: GatewayResponseDef): string {
  const message = def.message !== undefined ? JSON.stringify(def.message) : '$context.error.messageString';
  return `{"error":{"type":"${def.type}","message":${message},"request_id":"req_$context.requestId"}}`;
}

/**
 * The bytes API Gateway answers for a gateway response: its template rendered with `requestId`
 * (API Gateway's uuid, also in `x-amzn-RequestId`). `status` for a default response (which keeps
 * API Gateway's status), `message` for one without its own.
 */
export function gatewayAnswer(def: GatewayResponseDef, o: { requestId?: string; status?: number; message?: string } = {}): EdgeAnswer {
  const status = def.status ?? o.status;
  const message = def.message ?? o.message;
  if (status === undefined || message === undefined) throw new Error(`gateway response ${def.id} needs the status and message API Gateway would give`);
  const requestId = o.requestId ?? randomUUID();
  const body = gatewayResponseTemplate({ ...def, message }).replace('$context.requestId', requestId);
  return { status, headers: { ...def.headers, 'Content-Type': 'application/json', 'x-amzn-RequestId': requestId }, body };
}

/** A body of the web ACL (its custom response bodies are fixed text: no request id at all). */
export function wafBody(e: Pick<ApiError, 'type' | 'message' | 'details'>): string {
  return JSON.stringify({ error: { type: e.type, message: e.message, details: e.details } });
}

/** A block of the web ACL with a custom response (a body over 4 MiB): its status and fixed body, no request id. */
export function wafAnswer(e: Pick<ApiError, 'status' | 'type' | 'message' | 'details'>): EdgeAnswer {
  return { status: e.status, headers: { 'Content-Type': 'application/json' }, body: wafBody(e) };
}

/**
 * The REST API's `binaryMediaTypes` (lib/api.ts): a request whose Content-Type matches one reaches
 * the function base64-encoded (`isBase64Encoded: true`), any other as text, byte for byte, which is
 * what a signature check over the raw body (the Stripe webhook) needs; a response the function
 * base64-encodes is sent as bytes only when the client's first Accept value matches one, else as
 * the base64 text (https://docs.aws.amazon.com/apigateway/latest/developerguide/api-gateway-payload-encodings.html).
 */
export const BINARY_MEDIA_TYPES: readonly string[] = ['multipart/form-data', 'image/*', 'video/*', 'audio/*', 'application/octet-stream'];

/** Whether a Content-Type, or the first value of an Accept header, matches BINARY_MEDIA_TYPES (`type/*` included). */
export function isBinaryMediaType(header: string | undefined): boolean {
  const media = (header ?? '').split(',')[0]!.split(';')[0]!.trim().toLowerCase();
  if (!media.includes('/')) return false;
  const [type] = media.split('/');
  return BINARY_MEDIA_TYPES.some((b) => b === media || (b.endsWith('/*') && b.slice(0, -2) === type));
}

/** SizeRestrictions_QUERYSTRING of AWS's core rule set: a query string over 2,048 bytes is blocked. */
export const MAX_QUERY_STRING_BYTES = 2048;
/** SizeRestrictions_URIPATH of AWS's core rule set: a URI path over 1,024 bytes is blocked. */
export const MAX_URI_PATH_BYTES = 1024;

/**
 * The ends of the upload routes' paths (`/upload`, `/retry`): the core rule set is not applied to
 * them (their bodies are binary, lib/edges/waf.ts), so neither are its size rules.
 */
export const COMMON_RULES_EXEMPT_PATH_ENDS: readonly string[] = [
  ...new Set(
    ROUTES.filter((r) => r.access.bucket === 'write' && r.method === 'POST')
      .map((r) => r.path.replace(/\{[^}]+\}/g, ''))
      .map((p) => p.slice(p.lastIndexOf('/'))),
  ),
];

/**
 * The core rule set's size rule a request breaks, if any, by its request target as sent (path and
 * query string, still percent-encoded: what the web ACL measures). The web ACL sees the path with
 * the stage in front (`/api/v1/...`), so the stage counts here too (a custom domain hides it: the
 * local front is then 4 bytes stricter, never more lenient).
 */
export function commonRuleBlocking(target: string): 'SizeRestrictions_QUERYSTRING' | 'SizeRestrictions_URIPATH' | null {
  const q = target.indexOf('?');
  const path = `/${STAGE_NAME}${q < 0 ? target : target.slice(0, q)}`;
  if (COMMON_RULES_EXEMPT_PATH_ENDS.some((end) => path.endsWith(end))) return null;
  if (q >= 0 && Buffer.byteLength(target.slice(q + 1)) > MAX_QUERY_STRING_BYTES) return 'SizeRestrictions_QUERYSTRING';
  if (Buffer.byteLength(path) > MAX_URI_PATH_BYTES) return 'SizeRestrictions_URIPATH';
  return null;
}

/**
 * The web ACL's per-IP rate-based rules (lib/edges/waf.ts), as a default deployment sets them
 * (context `wafRatePer5Min` and `wafSignupRatePer5Min`): requests per address in the last five
 * minutes, on every route and on the signup routes. The local HTTP front applies the same rules
 * (local/waf-rate.ts).
 */
export const WAF_RATE_DEFAULTS = { perIpPer5Min: 6000, signupPerIpPer5Min: 20 } as const;
export const WAF_RATE_WINDOW_SECONDS = 300;

/** The paths the signup rule counts (manifest `rateLimit: signup_*`: unauthenticated signups). */
export const SIGNUP_PATHS: readonly string[] = ROUTES.filter((r) => r.rateLimit === 'signup_buyer' || r.rateLimit === 'signup_worker').map((r) => r.path);

/** What a rate-based rule's block answers (its custom response): 429, Retry-After the window, a fixed body without a request id. */
export const WAF_RATE_LIMITED: EdgeAnswer = {
  status: 429,
  headers: { 'Content-Type': 'application/json', 'Retry-After': String(WAF_RATE_WINDOW_SECONDS) },
  body: JSON.stringify({ error: { type: 'rate_limit_exceeded', message: `Too many requests from this address; retry after ${WAF_RATE_WINDOW_SECONDS} seconds.` } }),
};

/**
 * The stage's default method throttling (lib/api.ts `deployOptions`): API Gateway applies it to each
 * method of the stage on its own, as a token bucket of `burst` requests refilled at `ratePerSecond`;
 * a request that finds the bucket empty gets the THROTTLED gateway response (429). The local HTTP
 * front applies the same buckets (local/stage-throttle.ts).
 */
export const STAGE_THROTTLE = { ratePerSecond: 200, burst: 400 } as const;

/** API Gateway's own message for a throttled request (`$context.error.messageString`). */
export const THROTTLED_MESSAGE = 'Too Many Requests';
