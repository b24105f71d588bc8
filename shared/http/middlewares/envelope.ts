/**
 * Outermost middleware: request id (D4: `X-Request-Id: req_<ULID>` on every response), header
 * normalisation, the response shape, and the error envelope for every error (never a stack trace).
 */
import type middy from '@middy/core';
import type { APIGatewayProxyEvent, APIGatewayProxyResult } from 'aws-lambda';
import { ApiError, errors, ConditionFailed, Contention } from '../../errors';
import { newId } from '../../ids';
import { logger } from '../../logger';
import { setState, state, type ApiResult } from '../state';
import type { RouteDef } from '../../manifest/routes';

type Req = middy.Request<APIGatewayProxyEvent, APIGatewayProxyResult>;

/**
 * A zod validation error (the full API's ZodError or zod/mini's $ZodError, both with `issues`),
 * recognised by its shape rather than by `instanceof`, so that a route without schemas does not
 * load zod for this check.
 */
function isZodError(err: unknown): err is Error & { issues: { path: PropertyKey[]; message: string; code: string }[] } {
  return err instanceof Error && (err.name === 'ZodError' || err.name === '$ZodError') && Array.isArray((err as { issues?: unknown }).issues);
}

export function toApiError(err: unknown): ApiError {
  if (err instanceof ApiError) return err;
  if (isZodError(err)) {
    return errors.validation('The request is invalid.', err.issues.map((i) => ({ field: i.path.map(String).join('.'), message: i.message, code: i.code })));
  }
  if (err instanceof Contention) {
    logger.warn('transaction contention outlasted the retries', { attempts: err.attempts });
    return errors.conflict('Other requests are changing the same records right now; nothing was written. Retry the request.', [
      { message: 'transaction conflict', code: 'transaction_conflict' },
    ], { 'Retry-After': '1' });
  }
  if (err instanceof ConditionFailed) {
    logger.info('unmapped condition failure', { reasons: err.reasons });
    // Says "retry", so it carries Retry-After: the idempotency key is released, not bound to it (D11).
    return errors.conflict('The resource changed while the request ran; retry.', undefined, { 'Retry-After': '1' });
  }
  return errors.internal();
}

export function errorBody(err: ApiError, requestId: string) {
  return {
    error: {
      type: err.type,
      message: err.message,
      request_id: requestId,
      ...(err.details && err.details.length ? { details: err.details } : {}),
      ...(err.extra ?? {}),
    },
  };
}

function lowerHeaders(event: APIGatewayProxyEvent): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(event.headers ?? {})) if (v !== undefined && v !== null) out[k.toLowerCase()] = v;
  return out;
}

function flatQuery(event: APIGatewayProxyEvent): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(event.queryStringParameters ?? {})) if (v !== undefined) out[k] = v;
  return out;
}

export function envelope(route: RouteDef): middy.MiddlewareObj<APIGatewayProxyEvent, APIGatewayProxyResult> {
  return {
    before: async (request: Req) => {
      const event = request.event;
      const headers = lowerHeaders(event);
      const rawBodyText = event.body == null ? null : event.isBase64Encoded ? Buffer.from(event.body, 'base64').toString('latin1') : event.body;
      const s = {
        route,
        requestId: newId('request'),
        startedAt: Date.now(),
        headers,
        params: (event.pathParameters ?? {}) as Record<string, string>,
        rawQuery: flatQuery(event),
        repeatedQuery: Object.entries(event.multiValueQueryStringParameters ?? {}).flatMap(([k, v]) => ((v?.length ?? 0) > 1 ? [k] : [])),
        rawBodyText,
        bodyBase64: event.body != null && event.isBase64Encoded === true,
        json: undefined as unknown,
        sourceIp: event.requestContext?.identity?.sourceIp ?? '0.0.0.0',
        principal: null,
        resource: null,
        body: undefined,
        query: undefined,
        idem: null,
        replay: null,
        responseHeaders: {},
      };
      setState(event, s);
      logger.appendKeys({ request_id: s.requestId, route: route.id });
    },
    after: async (request: Req) => {
      const s = state(request.event);
      const result = request.response as unknown as ApiResult | undefined;
      if (s.replay) {
        // D11/D49: the stored response, with its original request id.
        request.response = {
          statusCode: s.replay.status,
          headers: {
            ...s.responseHeaders,
            ...(s.replay.headers ?? {}),
            // As the first answer: a 204 had no body, so no Content-Type.
            ...(s.replay.status === 204 ? {} : { 'Content-Type': 'application/json' }),
            'X-Request-Id': s.replay.request_id,
            'Idempotent-Replayed': 'true',
          },
          body: s.replay.body === null || s.replay.body === undefined ? '' : JSON.stringify(s.replay.body),
        };
        return;
      }
      const status = result?.status ?? route.successStatus ?? 200;
      const hasBody = status !== 204 && result?.body !== undefined;
      request.response = {
        statusCode: status,
        headers: {
          ...s.responseHeaders,
          ...(result?.headers ?? {}),
          ...(hasBody ? { 'Content-Type': result?.contentType ?? 'application/json' } : {}),
          'X-Request-Id': s.requestId,
        },
        body: !hasBody ? '' : typeof result!.body === 'string' && result?.contentType ? (result.body as string) : JSON.stringify(result!.body),
      };
      logger.info('request', { status, ms: Date.now() - s.startedAt });
    },
    onError: async (request: Req) => {
      let requestId: string;
      let extraHeaders: Record<string, string> = {};
      try {
        const s = state(request.event);
        requestId = s.requestId;
        extraHeaders = s.responseHeaders;
      } catch {
        requestId = newId('request');
      }
      const err = toApiError(request.error);
      if (err.status >= 500) logger.error('request failed', { error: request.error as Error });
      else logger.info('request refused', { status: err.status, type: err.type });
      request.response = {
        statusCode: err.status,
        headers: { ...extraHeaders, ...(err.headers ?? {}), 'Content-Type': 'application/json', 'X-Request-Id': requestId },
        body: JSON.stringify(errorBody(err, requestId)),
      };
    },
  };
}
