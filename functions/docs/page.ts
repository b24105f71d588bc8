import { routeWithoutIdempotencyKey } from '../../shared/http/route-without-key';
import { docsPage } from '../../shared/openapi/page';

// D72: the reference for people: Swagger UI from the bundled npm assets, no outside network.
export const handler = routeWithoutIdempotencyKey('docs.page', {}, async () => ({
  body: docsPage(),
  contentType: 'text/html; charset=utf-8',
  headers: { 'Content-Security-Policy': "default-src 'self'; img-src 'self' data:; style-src 'self' 'unsafe-inline'; script-src 'self'" },
}));
