/**
 * `routeWithoutIdempotencyKey(id, schemas, fn)`: how the handler of a route that takes no
 * Idempotency-Key (manifest idempotency 'none': the reads, and the PATCH and DELETE that are
 * idempotent by themselves) is built. The same middlewares as `route` (./route.ts) but the
 * idempotency one, which for such a route does nothing; leaving it out keeps the idempotency store,
 * the sealer and the KMS client out of the route's bundle (cold start, issue 15). A route whose
 * manifest entry takes a key is refused here, when its module loads.
 */
import { routeById } from '../manifest/routes';
import { composeRoute, type ApiHandler, type ApiRequest, type Out } from './route-core';
import type { Schemas } from './middlewares/validate';
import type { ApiResult } from './state';

export function routeWithoutIdempotencyKey<S extends Schemas>(
  id: string,
  schemas: S,
  fn: (req: ApiRequest<Out<S['body']>, Out<S['query']>>) => Promise<ApiResult>,
): ApiHandler {
  const def = routeById(id);
  if (def.idempotency !== 'none') {
    throw new Error(`route ${id} takes an Idempotency-Key (${def.idempotency}); build it with route() from shared/http/route`);
  }
  return composeRoute(def, schemas, fn, null);
}
