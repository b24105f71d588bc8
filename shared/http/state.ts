/** Per-request state shared by the middlewares of one invocation (keyed by the event object). */
import type { APIGatewayProxyEvent } from 'aws-lambda';
import type { RouteDef } from '../manifest/routes';
import type { BuyerPrincipal, TenantReads, WorkerPrincipal } from '../types';

export type { TenantReads };
import type { IdempotencyHandle, StoredResponse } from '../idempotency';
import type { Counts } from '../ratelimit';

export interface ApiState {
  route: RouteDef;
  requestId: string;
  startedAt: number;
  /** Request headers, lower-cased names. */
  headers: Record<string, string>;
  params: Record<string, string>;
  rawQuery: Record<string, string>;
  /** Query parameters sent more than once (`?limit=1&limit=2`): refused, never silently the last. */
  repeatedQuery: string[];
  rawBodyText: string | null;
  /** The body came base64-encoded (API Gateway does so for binary media types): `rawBodyText` holds its bytes as latin1. */
  bodyBase64: boolean;
  /** Parsed JSON body, or undefined when none / not JSON. */
  json: unknown;
  sourceIp: string;
  principal: BuyerPrincipal | WorkerPrincipal | null;
  resource: Record<string, unknown> | null;
  /**
   * The path's resource as read (strongly consistent) in the same BatchGetItem as the tier and the
   * balance; the resource middleware applies its visibility rules to it instead of reading again.
   */
  prefetched?: { PK: string; SK: string; item: Record<string, unknown> | undefined };
  /** This request's counts, taken on the secret item by authentication (rate-limited routes). */
  counts?: Counts | null;
  /** The key has two live secrets (rotation overlap): its limit is counted on the key's window item. */
  sharedCount?: boolean;
  /** The secret item that counted this request (shared/auth/authenticate.ts), when one did. */
  countedOn?: string | null;
  /** Tenant items read in the second step for the domain function (the route's `reads`). */
  tenant?: TenantReads;
  body: unknown;
  query: unknown;
  idem: IdempotencyHandle | null;
  replay: StoredResponse | null;
  /** Headers added by middlewares (rate limits, credits). */
  responseHeaders: Record<string, string>;
}

const states = new WeakMap<object, ApiState>();

export function setState(event: APIGatewayProxyEvent, s: ApiState): void {
  states.set(event, s);
}

export function state(event: APIGatewayProxyEvent): ApiState {
  const s = states.get(event);
  if (!s) throw new Error('request state missing: the envelope middleware must run first');
  return s;
}

/** What a handler returns; the envelope middleware turns it into the API Gateway result. */
export interface ApiResult {
  status?: number;
  body?: unknown;
  headers?: Record<string, string>;
  /** Non-JSON body (e.g. the local checkout page). */
  contentType?: string;
}
