/**
 * `route(id, schemas, fn, opts)`: how the handler of a route that takes an Idempotency-Key
 * (manifest idempotency 'required' or 'optional') is built; the idempotency middleware runs last
 * (D42). A route whose response holds a one-time secret (manifest access.kms 'stored-response')
 * passes `{ sealer: responseSealer }` so its stored response is sealed; checked against the manifest when the module
 * loads. Routes that take no key use `routeWithoutIdempotencyKey` (./route-without-key.ts). Either
 * way a route bundles the idempotency store and the sealer (with its KMS client) only if it uses them.
 */
import { routeById } from '../manifest/routes';
import { idempotency, sealsResponse } from './middlewares/idempotency';
import type { Sealer } from '../secrets/sealer';
import { composeRoute, type ApiHandler, type ApiRequest, type Out } from './route-core';
import type { Schemas } from './middlewares/validate';
import type { ApiResult } from './state';

export type { ApiHandler, ApiRequest } from './route-core';

export function route<S extends Schemas>(
  id: string,
  schemas: S,
  fn: (req: ApiRequest<Out<S['body']>, Out<S['query']>>) => Promise<ApiResult>,
  opts: { sealer?: () => Sealer } = {},
): ApiHandler {
  const def = routeById(id);
  if (sealsResponse(def) !== (opts.sealer !== undefined)) {
    throw new Error(`route ${id}: its manifest ${sealsResponse(def) ? 'seals its responses: pass { sealer }' : 'does not seal: pass no sealer'}`);
  }
  return composeRoute(def, schemas, fn, idempotency(def, opts.sealer));
}
