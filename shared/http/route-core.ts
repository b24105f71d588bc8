/**
 * How a buyer or worker HTTP handler is put together (see ./route.ts and ./route-without-key.ts,
 * the two ways a handler module builds one). The policy of the route (principal, scope,
 * idempotency, resource, rate-limit bucket, success status) comes from its manifest entry; the
 * middlewares run in the order D42 fixes:
 * envelope → authentication → rate limit → scope → resource (404) → validation → idempotency.
 */
import middy from '@middy/core';
import type { APIGatewayProxyEvent, APIGatewayProxyResult, Context } from 'aws-lambda';
import type { RouteDef } from '../manifest/routes';
import { envelope } from './middlewares/envelope';
import { withInvocationScope } from '../logger';
import { authentication, authorization, rateLimit } from './middlewares/access';
import { resource } from './middlewares/resource';
import { validation, type Schemas } from './middlewares/validate';
import { registerRouteSchemas } from '../openapi/registry';
import { state, type ApiResult, type ApiState, type TenantReads } from './state';
import { decodePathParams } from './params';
import type { MutationContext } from '../context';
import type { Actor, BuyerPrincipal, WorkerPrincipal } from '../types';
import type { core } from 'zod';

export interface ApiRequest<B, Q> {
  route: RouteDef;
  requestId: string;
  body: B;
  query: Q;
  params: Record<string, string>;
  headers: Record<string, string>;
  sourceIp: string;
  /** The buyer principal (routes with principal api_key). */
  buyer: BuyerPrincipal;
  /** The worker principal (worker routes). */
  worker: WorkerPrincipal;
  /** The resource loaded from the path, when the route names one. */
  resource: Record<string, unknown>;
  /** Tenant items read beside the rate-limit decision (the route's `reads`), when all were read. */
  tenant: TenantReads | undefined;
  /** Context for mutating domain calls (actor, request id, idempotency handle). */
  ctx: MutationContext;
  /** The raw request body bytes (base64 bodies decoded), for multipart uploads (D24). */
  rawBody: Buffer | null;
}

export type Out<S> = S extends core.$ZodType ? core.output<S> : undefined;

type Middleware = middy.MiddlewareObj<APIGatewayProxyEvent, APIGatewayProxyResult>;

export type ApiHandler = (event: APIGatewayProxyEvent, context: Context) => Promise<APIGatewayProxyResult>;

function actorOf(s: ApiState): Actor {
  const p = s.principal;
  if (p?.kind === 'api_key') return { type: 'api_key', id: p.keyId };
  if (p?.kind === 'worker') return { type: 'worker', id: p.workerId };
  return { type: 'system', id: 'anonymous' };
}

/**
 * The handler of route `def`: the middlewares in their order, then `fn`. `keyed` is the
 * Idempotency-Key middleware for routes that take a key; routes that take none (idempotency 'none')
 * leave it out, and with it the idempotency store and the sealer it loads.
 */
export function composeRoute<S extends Schemas>(
  def: RouteDef,
  schemas: S,
  fn: (req: ApiRequest<Out<S['body']>, Out<S['query']>>) => Promise<ApiResult>,
  keyed: Middleware | null,
): ApiHandler {
  const id = def.id;
  // D72: the OpenAPI document is generated from these same schemas.
  registerRouteSchemas(id, schemas);
  const inner = async (event: APIGatewayProxyEvent): Promise<APIGatewayProxyResult> => {
    const s = state(event);
    if (s.replay) return undefined as unknown as APIGatewayProxyResult; // the envelope writes the replay
    const req: ApiRequest<Out<S['body']>, Out<S['query']>> = {
      route: def,
      requestId: s.requestId,
      body: s.body as Out<S['body']>,
      query: s.query as Out<S['query']>,
      params: decodePathParams(s.params),
      headers: s.headers,
      sourceIp: s.sourceIp,
      buyer: s.principal as BuyerPrincipal,
      worker: s.principal as WorkerPrincipal,
      resource: s.resource ?? {},
      tenant: s.tenant,
      ctx: { actor: actorOf(s), requestId: s.requestId, idem: s.idem },
      rawBody: s.rawBodyText === null ? null : Buffer.from(s.rawBodyText, event.isBase64Encoded ? 'latin1' : 'utf8'),
    };
    return (await fn(req)) as unknown as APIGatewayProxyResult;
  };
  // Observability: each invocation logs in its own scope (Lambda context, then the request id the
  // envelope appends), so concurrent requests in one process never trade keys (issue 11.7).
  const handler = middy<APIGatewayProxyEvent, APIGatewayProxyResult>(inner, { timeoutEarlyInMillis: 0 })
    .use(envelope(def))
    .use(authentication(def))
    .use(rateLimit(def))
    .use(authorization(def))
    .use(resource(def))
    .use(validation(schemas));
  if (keyed) handler.use(keyed);
  return withInvocationScope(handler as unknown as ApiHandler);
}
