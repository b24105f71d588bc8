/**
 * The OpenAPI document as served (D72): the checked-in `shared/openapi/openapi.json`, shipped beside
 * the function as a file (the route's `native.files`, `OPENAPI_DOCUMENT` names it) and read on the
 * first request, then kept as compact JSON text. Importing it would evaluate a 160 KB object
 * literal at every cold start and stringify it on every request.
 */
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { config } from '../config';

let text: Promise<string> | null = null;

/** Locally (no `OPENAPI_DOCUMENT`) the checked-in file beside this module. */
const documentPath = () => process.env.OPENAPI_DOCUMENT ?? join(__dirname, 'openapi.json');

export function openApiDocumentText(): Promise<string> {
  text ??= readFile(documentPath(), 'utf8')
    // Its server is this deployment's base URL (deployed, it ends with the API's stage, `/api`): a
    // tool that resolves paths against it (Swagger UI, Postman, a generated SDK) calls this API.
    .then((raw) => JSON.stringify({ ...(JSON.parse(raw) as Record<string, unknown>), servers: [{ url: config().publicBaseUrl, description: 'This service' }] }))
    .catch((e: unknown) => {
      text = null; // a failed read is retried by the next request
      throw e;
    });
  return text;
}
