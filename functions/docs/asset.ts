import { routeWithoutIdempotencyKey } from '../../shared/http/route-without-key';
import { readDocsAsset } from '../../shared/openapi/page';
import { errors } from '../../shared/errors';

// D72: Swagger UI's script and style, read from the swagger-ui-dist package (shipped with the function).
export const handler = routeWithoutIdempotencyKey('docs.asset', {}, async (req) => {
  const asset = await readDocsAsset(req.params.asset ?? '');
  if (!asset) throw errors.notFound('asset', req.params.asset);
  return {
    status: 200,
    body: asset.body,
    contentType: asset.contentType,
    headers: { 'Cache-Control': 'public, max-age=86400' },
  };
});
