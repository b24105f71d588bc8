/**
 * The reference page (`GET /docs`): Swagger UI from the swagger-ui-dist npm package, served by the
 * service itself (`GET /docs/assets/{asset}`), so the page works without outside network. URLs are
 * relative, so the page works under a deployed stage prefix too (`/api/docs`).
 */
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { packageFile } from '../media/native';

/** The only files served: a fixed list, never a path from the request. */
const ASSETS: Record<string, { file: string | null; contentType: string }> = {
  'swagger-ui.css': { file: 'swagger-ui.css', contentType: 'text/css; charset=utf-8' },
  'swagger-ui-bundle.js': { file: 'swagger-ui-bundle.js', contentType: 'application/javascript; charset=utf-8' },
  'init.js': { file: null, contentType: 'application/javascript; charset=utf-8' },
};

/** Starts Swagger UI on the document (a file of its own: the page's policy forbids inline scripts). */
const INIT = `window.addEventListener('load', function () {
  window.ui = SwaggerUIBundle({ url: 'v1/openapi.json', dom_id: '#swagger-ui', deepLinking: true, tryItOutEnabled: false });
});
`;

export function docsPage(): string {
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>Media marketplace API reference</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<link rel="stylesheet" href="docs/assets/swagger-ui.css">
</head>
<body>
<div id="swagger-ui"></div>
<script src="docs/assets/swagger-ui-bundle.js"></script>
<script src="docs/assets/init.js"></script>
</body>
</html>
`;
}

const cache = new Map<string, string>();

export async function readDocsAsset(name: string): Promise<{ body: string; contentType: string } | null> {
  const a = Object.hasOwn(ASSETS, name) ? ASSETS[name] : undefined;
  if (!a) return null;
  if (a.file === null) return { body: INIT, contentType: a.contentType };
  let body = cache.get(name);
  if (body === undefined) {
    body = await readFile(join(packageFile('swagger-ui-dist'), a.file), 'utf8');
    cache.set(name, body);
  }
  return { body, contentType: a.contentType };
}
