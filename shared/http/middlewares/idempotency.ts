/**
 * Idempotency-Key handling (D10, D11, D49). Runs last before the handler: requests refused earlier
 * (401/403/404/400) never take a key. The handler's write records the response in its own
 * transaction; other outcomes are stored here (4xx) or release the key (5xx).
 */
import type middy from '@middy/core';
import type { APIGatewayProxyEvent, APIGatewayProxyResult } from 'aws-lambda';
import { acquire, fingerprint, MAX_KEY_LENGTH } from '../../idempotency';
import { errors } from '../../errors';
import { state, type ApiResult } from '../state';
import { errorBody, toApiError } from './envelope';
import type { RouteDef } from '../../manifest/routes';
import { logger } from '../../logger';
import { sha256hex } from '../../auth/secrets';
import { takeParkedValidationError } from './validate';
import type { Sealer } from '../../secrets/sealer';

/**
 * D10 scope of a key. Anonymous routes (signup, worker signup; issue 11.2) have no principal, so
 * their records are scoped to the route and the caller's source address as well: another caller
 * who learns the key and the body is not handed the first caller's secrets, it runs afresh (and
 * meets the duplicate e-mail). The address is hashed; the record holds no IP in the clear.
 */
function scopeOf(s: ReturnType<typeof state>): string {
  const p = s.principal;
  if (p?.kind === 'api_key') return `${p.orgId}#${p.env}`;
  if (p?.kind === 'worker') return `wkr#${p.workerId}`;
  return `anon#${s.route.id}#${sha256hex(`source:${s.sourceIp}`).slice(0, 32)}`;
}

/** Routes declared to seal stored responses (access.kms 'stored-response') hold a one-time secret in their response. */
// (Not manifest/access.ts's kmsAllows: that module's imports would join every route's bundle.)
export const sealsResponse = (route: RouteDef) => ['encrypt', 'encrypt-decrypt'].includes(route.access.kms?.['stored-response'] ?? '');

/**
 * `sealer` is given by the routes that seal (see `route`'s options); the middleware does not import
 * it, so the other routes do not bundle the sealer and its KMS client.
 */
export function idempotency(route: RouteDef, sealer?: () => Sealer): middy.MiddlewareObj<APIGatewayProxyEvent, APIGatewayProxyResult> {
  return {
    before: async (request) => {
      if (route.idempotency === 'none') return;
      const s = state(request.event);
      // D11: a body refused by validation is stored under the key like any other 4xx.
      const refused = takeParkedValidationError(request.event);
      const key = s.headers['idempotency-key'];
      if (key === undefined || key === '') {
        if (refused) throw refused;
        if (route.idempotency === 'required') {
          throw errors.validation('The Idempotency-Key header is required on this request.', [
            { field: 'Idempotency-Key', message: 'header is required', code: 'required' },
          ]);
        }
        return;
      }
      if (key.length > MAX_KEY_LENGTH) {
        throw errors.validation(`Idempotency-Key is longer than ${MAX_KEY_LENGTH} characters.`, [
          { field: 'Idempotency-Key', message: `at most ${MAX_KEY_LENGTH} characters`, code: 'too_long' },
        ]);
      }
      const r = await acquire({
        scope: scopeOf(s),
        key,
        fingerprint: fingerprint(route.method, request.event.path, s.rawBodyText, s.headers['content-type'], s.rawQuery),
        requestId: s.requestId,
        successStatus: route.successStatus ?? 200,
        sealer: sealer?.(),
      });
      if (r.kind === 'replay') s.replay = r.stored;
      else {
        s.idem = r.handle;
        if (refused) throw refused;
      }
    },
    after: async (request) => {
      const s = state(request.event);
      if (!s.idem || s.idem.recorded || s.replay) return;
      const result = request.response as unknown as ApiResult | undefined;
      const status = result?.status ?? route.successStatus ?? 200;
      if (status >= 500) return s.idem.release();
      await s.idem.store({ status, body: result?.body ?? null, request_id: s.requestId });
    },
    onError: async (request) => {
      let s;
      try {
        s = state(request.event);
      } catch {
        return;
      }
      if (!s.idem) return;
      const err = toApiError(request.error);
      // An answer that asks for a retry later (Retry-After: a 409 for contention or a stale
      // snapshot, a 429 for a limit the handler counts) is not an outcome: storing it would replay
      // "retry" with a frozen Retry-After to the retry itself, so the key is released like a 5xx.
      const retryLater = err.headers?.['Retry-After'] !== undefined;
      try {
        if (err.status >= 500 || retryLater) await s.idem.release();
        else
          await s.idem.store({
            status: err.status,
            body: errorBody(err, s.requestId),
            request_id: s.requestId,
            ...(err.headers ? { headers: err.headers } : {}),
          });
      } catch (e) {
        // The error envelope must still go out; an unreleased lock goes stale in minutes.
        logger.error('idempotency bookkeeping failed', { error: e as Error });
      }
    },
  };
}
