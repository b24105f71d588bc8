/**
 * The limits the deployed API puts on a request, enforced by the local HTTP front (local/http.ts,
 * D61), and the answers it gives: the 4 MiB body (the web ACL's rule deployed,
 * shared/http/body-limits.ts), API Gateway's 10 KiB headers, Lambda's 6 MB payload each way
 * (binary bodies count base64-encoded), and the integration time-outs. A refused body is read to its end (up to a bound) so that
 * the client reads the answer rather than a connection reset (issue 11.5).
 *
 * Where the deployed answer is the web ACL's or a gateway response (a body over 4 MiB, a 502, a
 * 504, a query string over 2,048 bytes), the local front answers exactly those bytes
 * (shared/http/edge.ts): no `req_<ULID>`, no X-Request-Id, so no client or test comes to rely on
 * one locally that the deployed edge does not give.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { APIGatewayProxyEvent, APIGatewayProxyResult } from 'aws-lambda';
import { newId } from '../shared/ids';
import type { ApiError, ErrorDetail } from '../shared/errors';
import { bodyOverLimit, MAX_BODY_BYTES } from '../shared/http/body-limits';
import { wafAnswer, type EdgeAnswer } from '../shared/http/edge';
import { DEFAULT_INTEGRATION_TIMEOUT_SECONDS, longPollTimeoutSeconds, ROUTE_FUNCTION_TIMEOUT_SECONDS } from '../shared/manifest/timeouts';

export { MAX_BODY_BYTES };
/** Lambda's synchronous invocation payload limit, request and response (6 MB). */
export const LAMBDA_PAYLOAD_BYTES = 6 * 1024 * 1024;
/** API Gateway's limit on the request line and headers (10 KiB); larger answers 431. */
export const MAX_HEADER_BYTES = 10 * 1024;
/** A refused body is drained up to this much so the client can read the answer; beyond, the connection closes. */
export const DRAIN_LIMIT_BYTES = 256 * 1024 * 1024;

export interface IntegrationTimeouts {
  /** API Gateway's integration time-out of every route but the long polls (29 s): 504 past it. */
  standardMs: number;
  /**
   * The function time-out of those routes (28 s): deployed, the function stops first and API
   * Gateway answers 502, so the local front does the same at this budget.
   */
  functionMs: number;
  /**
   * D20: a long poll holds up to 60 s; its function's time-out (63 s for 60 s), one second below its
   * integration's: deployed the function stops first and API Gateway answers 502, so locally too.
   */
  longPollMs: number;
}
/** The deployed values (shared/manifest/timeouts.ts), for the longest long poll the local runtime allows. */
export const DEFAULT_TIMEOUTS: IntegrationTimeouts = {
  standardMs: DEFAULT_INTEGRATION_TIMEOUT_SECONDS * 1000,
  functionMs: ROUTE_FUNCTION_TIMEOUT_SECONDS * 1000,
  longPollMs: longPollTimeoutSeconds(60).fn * 1000,
};

/**
 * Which limit ends a request of this kind first, and what the deployed API answers then, once its
 * function has been loaded. `initMs`: how long loading it took (a cold start, Lambda's init):
 * API Gateway's integration time-out counts it, the function's own time-out does not.
 */
export function requestBudget(t: IntegrationTimeouts, longPoll: boolean, initMs = 0): { ms: number; status: 502 | 504 } {
  if (longPoll) return { ms: t.longPollMs, status: 502 };
  const gatewayLeft = Math.max(0, t.standardMs - initMs);
  return t.functionMs < gatewayLeft ? { ms: t.functionMs, status: 502 } : { ms: gatewayLeft, status: 504 };
}

/** The D4 error envelope and its headers, with a fresh request id. */
export function envelope(type: string, message: string, details?: ErrorDetail[]): { body: string; requestId: string } {
  const requestId = newId('request');
  return { requestId, body: JSON.stringify({ error: { type, message, request_id: requestId, ...(details ? { details } : {}) } }) };
}

/** An error envelope (D4) answered by the adapter itself (or a local page), with its own request id. */
export function writeErrorEnvelope(
  res: ServerResponse,
  status: number,
  type: string,
  message: string,
  headers: Record<string, string> = {},
  details?: ErrorDetail[],
): void {
  if (res.headersSent) return void res.end();
  const { body, requestId } = envelope(type, message, details);
  res.writeHead(status, { ...headers, 'Content-Type': 'application/json', 'X-Request-Id': requestId, 'Content-Length': String(Buffer.byteLength(body)) });
  res.end(body);
}

/** An answer of the deployed edge itself (the web ACL, a gateway response), byte for byte. */
export function writeEdgeAnswer(res: ServerResponse, answer: EdgeAnswer, headers: Record<string, string> = {}): void {
  if (res.headersSent) return void res.end();
  res.writeHead(answer.status, { ...headers, ...answer.headers, 'Content-Length': String(Buffer.byteLength(answer.body)) });
  res.end(answer.body);
}

/** A body refused for its size: which limit, and whether it was read to its end (drained). */
export class BodyTooLarge extends Error {
  constructor(
    readonly limit: BodyLimit,
    readonly drained: boolean,
  ) {
    super('body too large');
  }
}

export interface BodyLimit {
  bytes: number;
  /** The refusal, as the web ACL's rule answers it deployed (its fixed body: no request id). */
  refuse(): ApiError;
}

/** The limit of a request's body: 4 MiB, a multipart upload's refusal pointing to the pre-signed upload. */
export function bodyLimitFor(contentType: string | undefined): BodyLimit {
  return { bytes: MAX_BODY_BYTES, refuse: () => bodyOverLimit(contentType) };
}

/**
 * Reads the body up to the limit. Above it (by Content-Length up front, else while streaming), the
 * rest is read and dropped up to DRAIN_LIMIT_BYTES so the client gets to read the refusal.
 */
const EMPTY = Buffer.alloc(0);

export function readBody(req: IncomingMessage, limit: BodyLimit): Promise<Buffer> {
  // HTTP/1.1: a request with neither Content-Length nor Transfer-Encoding has no body (RFC 9112
  // §6.3), so there is nothing to wait for (most GETs).
  if (req.headers['content-length'] === undefined && req.headers['transfer-encoding'] === undefined) {
    req.resume();
    return Promise.resolve(EMPTY);
  }
  return new Promise((resolve, reject) => {
    const declared = Number(req.headers['content-length'] ?? 0);
    const chunks: Buffer[] = [];
    let size = 0;
    let tooLarge = declared > limit.bytes;
    req.on('data', (chunk: Buffer) => {
      size += chunk.length;
      if (size > limit.bytes) tooLarge = true;
      if (tooLarge) {
        chunks.length = 0;
        if (size > DRAIN_LIMIT_BYTES) {
          req.pause();
          reject(new BodyTooLarge(limit, false));
        }
      } else chunks.push(chunk);
    });
    req.on('end', () => (tooLarge ? reject(new BodyTooLarge(limit, true)) : resolve(Buffer.concat(chunks))));
    req.on('error', reject);
  });
}

/**
 * 413 for a body over 4 MiB: the web ACL's answer (BodyOver4MiB, MultipartBodyOver4MiB), its fixed
 * body without a request id. Deployed the web ACL sees only a declared Content-Length; a chunked
 * body over the limit is refused here all the same (stricter than deployed, never more lenient).
 */
export function refuseBody(res: ServerResponse, err: BodyTooLarge): void {
  // Not drained (beyond DRAIN_LIMIT_BYTES): the connection cannot be reused.
  writeEdgeAnswer(res, wafAnswer(err.limit.refuse()), err.drained ? {} : { Connection: 'close' });
  if (!err.drained) res.once('finish', () => res.socket?.destroy());
}

/** The bytes Lambda would receive for this event (its JSON). */
export const eventPayloadBytes = (event: APIGatewayProxyEvent) => Buffer.byteLength(JSON.stringify(event));

/**
 * Whether an event could be above `limit` bytes as JSON, without serialising it: JSON writes a
 * UTF-16 unit in at most 6 bytes (`\u00XX`), the body is its only unbounded string, and the rest
 * (the request line and headers, at most MAX_HEADER_BYTES, in no more than 8 copies across the
 * event's fields, plus the fixed request context) is bounded. Only then is the event measured.
 */
export function eventMayExceed(event: APIGatewayProxyEvent, limit: number): boolean {
  return 6 * ((event.body?.length ?? 0) + 8 * MAX_HEADER_BYTES) + 16 * 1024 > limit && eventPayloadBytes(event) > limit;
}

/**
 * The same for a handler's result: its body, header names and values, at most 6 bytes a unit. A
 * body that is not a string (a malformed result) is always measured.
 */
export function resultMayExceed(result: APIGatewayProxyResult, limit: number): boolean {
  const exact = () => Buffer.byteLength(JSON.stringify(result)) > limit;
  if (result.body !== undefined && typeof result.body !== 'string') return exact();
  let units = result.body?.length ?? 0;
  for (const [k, v] of Object.entries(result.headers ?? {})) units += k.length + String(v).length;
  for (const [k, vs] of Object.entries(result.multiValueHeaders ?? {})) units += k.length + JSON.stringify(vs).length;
  return 6 * units + 4 * 1024 > limit && exact();
}

/** A raw HTTP/1.1 answer in the envelope, for errors found before Node made a request of the bytes. */
export function rawEnvelopeResponse(status: number, reason: string, type: string, message: string): string {
  const { body, requestId } = envelope(type, message);
  return (
    `HTTP/1.1 ${status} ${reason}\r\nContent-Type: application/json\r\nX-Request-Id: ${requestId}\r\n` +
    `Content-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`
  );
}
