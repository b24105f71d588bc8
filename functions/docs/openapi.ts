import { routeWithoutIdempotencyKey } from '../../shared/http/route-without-key';
import { openApiDocumentText } from '../../shared/openapi/document';

// D72: the OpenAPI 3.1 document, public (no key). Generated from the request schemas by
// `npm run openapi`; a test fails when the checked-in file differs from a fresh build.
export const handler = routeWithoutIdempotencyKey('docs.openapi', {}, async () => ({
  body: await openApiDocumentText(),
  contentType: 'application/json',
  headers: { 'Cache-Control': 'public, max-age=300', 'Access-Control-Allow-Origin': '*' },
}));
