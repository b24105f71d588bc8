/**
 * D72: the OpenAPI 3.1 document is served without a key, is valid OpenAPI 3.1, describes every
 * route of the manifest, and is exactly what a fresh build from the handlers' zod schemas gives.
 */
import { readFileSync } from 'node:fs';
import { Validator } from '@seriousme/openapi-schema-validator';
import { config } from '../../shared/config';
import { ROUTES } from '../../shared/manifest/routes';
import { renderDocument, DOCUMENT_PATH } from '../../shared/openapi/generate';
import { startTestRuntime, type TestRuntime } from '../support/harness';
import { signupBuyer } from '../support/buyers';

let rt: TestRuntime;
beforeAll(async () => {
  rt = await startTestRuntime();
});
afterAll(async () => {
  await rt?.stop();
});

describe('GET /v1/openapi.json', () => {
  test('D72: served without a key, as JSON', async () => {
    const res = await rt.request('GET', '/v1/openapi.json');
    expect(res.status).toBe(200);
    expect(res.headers['content-type']).toMatch(/^application\/json/);
    expect(res.json.openapi).toBe('3.1.0');
  });

  test("D72: its server is this deployment's base URL, so a tool resolving the paths against it reaches this API", async () => {
    const doc = (await rt.request('GET', '/v1/openapi.json')).json;
    expect(doc.servers).toEqual([{ url: config().publicBaseUrl, description: 'This service' }]);
    const res = await fetch(`${doc.servers[0].url}${'/v1/openapi.json'}`);
    expect(res.status).toBe(200);
  });

  test('D72: the document says what the spec says: a buyer sees four submission statuses, integer durations, every balance field', async () => {
    const doc = (await rt.request('GET', '/v1/openapi.json')).json;
    const schemas = doc.components.schemas;
    expect(schemas.Submission.properties.status.enum).toEqual(['pending_score', 'approved', 'rejected', 'retry_pending']);
    for (const f of ['min_duration_seconds', 'max_duration_seconds']) {
      expect(JSON.stringify(schemas.Job.properties[f])).toContain('"integer"');
    }
    const buyer = await signupBuyer(rt, 'Balance fields');
    const balance = (await rt.request('GET', '/v1/billing/credits', { key: buyer.live })).json;
    expect(Object.keys(balance).filter((k) => !(k in schemas.CreditBalance.properties))).toEqual([]);
  });

  test('D72: the served document is valid OpenAPI 3.1 (schema validator)', async () => {
    const doc = (await rt.request('GET', '/v1/openapi.json')).json;
    const validator = new Validator();
    const result = await validator.validate(doc);
    expect(result.errors).toBeUndefined();
    expect(result.valid).toBe(true);
    expect(validator.version).toBe('3.1');
  });

  test('D72: every buyer and worker route of the manifest is an operation, with its errors and security', async () => {
    const doc = (await rt.request('GET', '/v1/openapi.json')).json;
    const missing = ROUTES.filter((r) => !doc.paths[r.path]?.[r.method.toLowerCase()]).map((r) => r.id);
    expect(missing).toEqual([]);
    for (const r of ROUTES) {
      const op = doc.paths[r.path][r.method.toLowerCase()];
      expect(op.operationId).toBe(r.id);
      expect(op.responses['500']).toBeDefined();
      if (r.principal === 'api_key') {
        expect(op.security).toEqual([{ ApiKey: [] }]);
        expect(op.responses['401'].content['application/json'].schema).toEqual({ $ref: '#/components/schemas/Error' });
      }
      if (r.principal === 'worker') expect(op.security).toEqual([{ WorkerToken: [] }]);
      if (r.idempotency === 'required') expect(op.parameters).toContainEqual({ $ref: '#/components/parameters/IdempotencyKeyRequired' });
      for (const p of r.path.matchAll(/\{(\w+)\}/g)) expect(op.parameters).toContainEqual(expect.objectContaining({ name: p[1], in: 'path', required: true }));
    }
    expect(doc.components.securitySchemes.ApiKey).toMatchObject({ type: 'http', scheme: 'bearer' });
  });

  test('D72: request bodies come from the validating zod schemas (strict bodies, bounds)', async () => {
    const doc = (await rt.request('GET', '/v1/openapi.json')).json;
    const body = doc.paths['/v1/jobs'].post.requestBody.content['application/json'].schema;
    expect(body.additionalProperties).toBe(false);
    expect(body.required).toEqual(expect.arrayContaining(['type', 'description', 'files_needed', 'accepted_formats', 'price_per_file_cents']));
    expect(body.properties.files_needed).toMatchObject({ type: 'integer', minimum: 1 });
    const limit = doc.paths['/v1/jobs'].get.parameters.find((p: { name: string }) => p.name === 'limit');
    expect(limit).toMatchObject({ in: 'query', required: false, schema: { type: 'integer', minimum: 1, maximum: 100 } });
  });

  test('D72: the checked-in document equals a fresh build from the handlers (npm run openapi)', async () => {
    expect(readFileSync(DOCUMENT_PATH, 'utf8')).toBe(await renderDocument());
  });
});

describe('GET /docs', () => {
  test('D72: the reference page and its assets are served by the service itself, no key', async () => {
    const page = await rt.request('GET', '/docs');
    expect(page.status).toBe(200);
    expect(page.headers['content-type']).toMatch(/^text\/html/);
    const srcs = [...page.text.matchAll(/(?:src|href)="([^"]+)"/g)].map((m) => m[1]!);
    expect(srcs.length).toBeGreaterThanOrEqual(3);
    for (const src of srcs) {
      expect(src).not.toMatch(/^(https?:)?\/\//); // nothing from outside
      const asset = await rt.request('GET', `/${src}`);
      expect(asset.status).toBe(200);
      expect(asset.text.length).toBeGreaterThan(10);
    }
  });

  test('D72: an unknown asset name is 404 in the error envelope', async () => {
    const res = await rt.request('GET', '/docs/assets/package.json');
    expect(res.status).toBe(404);
    expect(res.json.error.type).toBe('not_found');
  });
});
