import type { APIGatewayProxyEvent, APIGatewayProxyResult } from 'aws-lambda';
import { errors } from '../../shared/errors';
import { newId } from '../../shared/ids';
import { logger, withInvocationScope } from '../../shared/logger';
import { errorBody } from '../../shared/http/middlewares/envelope';
import { UNKNOWN_ROUTE } from '../../shared/manifest/routes';

/*
 * D4 for a request no route takes (an unknown path, or a method its path does not declare): 404
 * `not_found` in the error envelope, with a `req_<ULID>` in the body and in X-Request-Id. Deployed,
 * API Gateway runs it as the ANY method of every resource and of the root `{proxy+}` (lib/api.ts);
 * locally the HTTP front runs it for every request the manifest does not match (local/http.ts).
 *
 * It answers from the same envelope pieces as the routes (request id, error body, log keys) but
 * not through their middlewares: it has no principal, scope, resource or schema, and validation
 * would answer 400 for a query string or a body before the 404. It reads no key, no table and
 * no secret, and is granted none.
 */
export const handler = withInvocationScope(async (event: APIGatewayProxyEvent): Promise<APIGatewayProxyResult> => {
  const requestId = newId('request');
  logger.appendKeys({ request_id: requestId, route: UNKNOWN_ROUTE.id });
  const err = errors.notFound('route', `${event.httpMethod} ${event.path}`);
  logger.info('request refused', { status: err.status, type: err.type });
  return {
    statusCode: err.status,
    headers: { 'Content-Type': 'application/json', 'X-Request-Id': requestId },
    body: JSON.stringify(errorBody(err, requestId)),
  };
});
