/**
 * Builds the OpenAPI 3.1 document (D72) from the route manifest, the request schemas the handlers
 * registered (./registry.ts, the same zod objects that validate requests) and the response schemas
 * of ./operations.ts. zod 4 emits JSON Schema 2020-12, which is OpenAPI 3.1's schema dialect.
 *
 * `buildOpenApi()` needs the handler modules loaded (each registers its schemas when imported):
 * `loadAllHandlers()` does that; `npm run openapi` writes the result to shared/openapi/openapi.json (and regenerates the client types),
 * which the service serves and the client's types are generated from.
 */
import * as z from 'zod';
import { resolve } from 'node:path';
import { ROUTES, type RouteDef } from '../manifest/routes';
import { edgeErrorEnvelope, errorEnvelope } from './schemas/common';
import { OPERATIONS, type Content } from './operations';
import { registeredSchemas } from './registry';

export const API_VERSION = '2026-03-18';

type Json = Record<string, unknown>;

/** Imports every handler module of the manifest, so that each registers its request schemas. */
export async function loadAllHandlers(root = resolve(__dirname, '../..')): Promise<void> {
  for (const r of ROUTES) await import(resolve(root, r.handler));
}

function isZod(x: unknown): x is z.core.$ZodType {
  return typeof x === 'object' && x !== null && '_zod' in x;
}

/** Collects named schemas (`.meta({id})`) as components and rewrites their references. */
class Components {
  readonly schemas: Record<string, Json> = {};

  convert(schema: z.core.$ZodType, io: 'input' | 'output'): Json {
    const out = z.toJSONSchema(schema, { target: 'draft-2020-12', io, unrepresentable: 'any' }) as Json;
    delete out.$schema;
    const defs = (out.$defs ?? {}) as Record<string, Json>;
    delete out.$defs;
    for (const [name, def] of Object.entries(defs)) this.schemas[name] = rewriteRefs(def) as Json;
    // A named schema (`.meta({id})`) comes back as a reference to its own definition, now a component.
    const r = rewriteRefs(out) as Json;
    delete r.id;
    return r;
  }
}

function rewriteRefs(v: unknown): unknown {
  if (Array.isArray(v)) return v.map(rewriteRefs);
  if (v && typeof v === 'object') {
    const o: Json = {};
    for (const [k, x] of Object.entries(v)) {
      if (k === '$ref' && typeof x === 'string') o[k] = x.replace(/^#\/\$defs\//, '#/components/schemas/');
      else if (k === 'id' && typeof x === 'string') continue; // meta ids become component names
      else o[k] = rewriteRefs(x);
    }
    return o;
  }
  return v;
}

function content(c: z.core.$ZodType | Content, comps: Components, io: 'input' | 'output'): Json {
  if (isZod(c)) return { 'application/json': { schema: comps.convert(c, io) } };
  return Object.fromEntries(Object.entries(c).map(([type, s]) => [type, { schema: isZod(s) ? comps.convert(s, io) : s }]));
}

/** The error statuses a route of this kind can answer, with when (its own extras come from OPERATIONS). */
export function errorStatuses(r: RouteDef, hasInput: boolean, extra: Record<number, string> = {}): Record<number, string> {
  const out: Record<number, string> = {};
  out[400] =
    hasInput || r.idempotency === 'required'
      ? 'Invalid input: `details[]` names each field (missing Idempotency-Key included).'
      : 'A query parameter, which this route takes none of: `details[]` names each (`unknown_field`).';
  if (r.principal !== 'none') out[401] = r.principal === 'worker' ? 'Missing or invalid worker token.' : 'Missing, invalid or revoked API key.';
  if (r.principal === 'api_key' && r.scope !== 'any' && r.scope !== null) out[403] = `The key lacks the \`${r.scope}\` scope.`;
  if (r.resource) out[404] = 'Unknown id, malformed id, or a resource of another organization or environment.';
  if (r.idempotency !== 'none') {
    out[409] = 'Same Idempotency-Key with another body (`idempotency_conflict`), or while the first request runs (`details[0].code = idempotency_key_in_use`, with Retry-After).';
  }
  if (hasInput) out[422] = 'Fields valid one by one but not together (e.g. a range whose start is after its end).';
  if (r.method === 'POST' || r.method === 'PATCH') out[413] = 'The request body is over 4 MiB (`details[0].code = body_too_large`), answered by the firewall: no `request_id`, no X-Request-Id.';
  if (r.principal !== 'none' || r.rateLimit.startsWith('signup')) out[429] = '`rate_limit_exceeded`, with Retry-After in seconds.';
  // The web ACL in front of every route (the EdgeError shape: no X-Request-Id).
  out[429] = `${out[429] ?? ''} Also the firewall's per-address limit (a fixed body without request_id).`.trim();
  if (!(r.access.bucket === 'write' && r.method === 'POST')) {
    out[403] = `${out[403] ?? ''} Also the firewall's answer to a query string over 2,048 bytes or a path over 1,024 (\`authorization_error\`, the gateway's request id).`.trim();
  }
  if (r.longPoll) {
    out[429] = `${out[429] ?? ''} Also for \`Prefer: wait\` when too many long polls of this route are held at once: by the organization (code \`long_polls_per_org\`) or in all (\`long_polls_full\`); a read without \`Prefer: wait\` is served.`.trim();
  }
  out[500] = 'Unexpected failure; retrying is safe.';
  out[502] = "The function failed or ran out of time before answering (API Gateway's answer: its own request id, no X-Request-Id); retrying with the same Idempotency-Key is safe.";
  if (r.longPoll) out[504] = "A long poll held past the integration time-out (API Gateway's answer: its own request id, no X-Request-Id); poll again.";
  for (const [status, why] of Object.entries(extra)) out[Number(status)] = out[Number(status)] ? `${why} ${out[Number(status)]}` : why;
  return out;
}

const requestIdHeader = { 'X-Request-Id': { $ref: '#/components/headers/X-Request-Id' } };
/** Statuses only the edge answers (the firewall, API Gateway): the EdgeError shape, no X-Request-Id. */
const EDGE_STATUSES = new Set(['413', '502', '504']);
/** Statuses both a function and the edge answer: either shape (X-Request-Id when a function answered). */
const SHARED_STATUSES = new Set(['403', '429']);
const errorSchema = (status: string): Json =>
  EDGE_STATUSES.has(status)
    ? { $ref: '#/components/schemas/EdgeError' }
    : SHARED_STATUSES.has(status)
      ? { anyOf: [{ $ref: '#/components/schemas/Error' }, { $ref: '#/components/schemas/EdgeError' }] }
      : { $ref: '#/components/schemas/Error' };

function rateHeaders(r: RouteDef): Json {
  if (r.principal === 'none') return {};
  return {
    'X-RateLimit-Limit': { $ref: '#/components/headers/X-RateLimit-Limit' },
    'X-RateLimit-Remaining': { $ref: '#/components/headers/X-RateLimit-Remaining' },
    'X-RateLimit-Reset': { $ref: '#/components/headers/X-RateLimit-Reset' },
    ...(r.principal === 'api_key' ? { 'X-Service-Credits-Remaining': { $ref: '#/components/headers/X-Service-Credits-Remaining' } } : {}),
  };
}

function operation(r: RouteDef, comps: Components): Json | null {
  const doc = OPERATIONS[r.id];
  if (!doc) return null;
  const schemas = registeredSchemas(r.id) ?? {};
  const parameters: Json[] = [];
  for (const m of r.path.matchAll(/\{(\w+)\}/g)) {
    parameters.push({ name: m[1], in: 'path', required: true, schema: { type: 'string' } });
  }
  if (schemas.query) {
    const q = comps.convert(schemas.query, 'input');
    const required = new Set((q.required as string[] | undefined) ?? []);
    for (const [name, schema] of Object.entries((q.properties ?? {}) as Record<string, Json>)) {
      const { description, ...rest } = schema;
      parameters.push({ name, in: 'query', required: required.has(name), ...(description ? { description } : {}), schema: rest });
    }
  }
  if (r.idempotency !== 'none') parameters.push({ $ref: `#/components/parameters/IdempotencyKey${r.idempotency === 'required' ? 'Required' : 'Optional'}` });
  if (r.longPoll) parameters.push({ $ref: '#/components/parameters/PreferWait' });

  const success = Object.fromEntries(
    Object.entries(doc.success).map(([status, s]) => [
      status,
      {
        description: s.description,
        headers: {
          ...requestIdHeader,
          ...rateHeaders(r),
          ...(r.idempotency !== 'none' ? { 'Idempotent-Replayed': { $ref: '#/components/headers/Idempotent-Replayed' } } : {}),
          ...(r.longPoll ? { 'Preference-Applied': { $ref: '#/components/headers/Preference-Applied' } } : {}),
        },
        ...(s.body ? { content: content(s.body, comps, 'output') } : {}),
      },
    ]),
  );
  const hasInput = Boolean(schemas.body || schemas.query);
  const errors = Object.fromEntries(
    Object.entries(errorStatuses(r, hasInput, doc.errors)).map(([status, why]) => [
      status,
      {
        description: why,
        headers: EDGE_STATUSES.has(status) ? {} : { ...requestIdHeader, ...(status === '429' || status === '409' || status === '503' ? { 'Retry-After': { $ref: '#/components/headers/Retry-After' } } : {}) },
        content: { 'application/json': { schema: errorSchema(status) } },
      },
    ]),
  );

  let requestBody: Json | undefined;
  if (schemas.body || doc.extraRequestContent) {
    const c: Json = {};
    if (schemas.body) Object.assign(c, content(schemas.body, comps, 'input'));
    if (doc.extraRequestContent) Object.assign(c, content(doc.extraRequestContent, comps, 'input'));
    requestBody = { required: r.method !== 'GET' && !doc.extraRequestContent && !doc.bodyOptional, content: c };
  }

  return {
    operationId: r.id,
    summary: doc.summary,
    ...(doc.description ? { description: doc.description } : {}),
    tags: [doc.tag],
    security: r.principal === 'api_key' ? [{ ApiKey: [] }] : r.principal === 'worker' ? [{ WorkerToken: [] }] : [],
    ...(r.scope && r.scope !== 'any' ? { 'x-scope': r.scope } : {}),
    ...(parameters.length ? { parameters } : {}),
    ...(requestBody ? { requestBody } : {}),
    responses: { ...success, ...errors },
  };
}

/** Manifest routes that OPERATIONS does not describe yet. */
export function undocumentedRoutes(): RouteDef[] {
  return ROUTES.filter((r) => !OPERATIONS[r.id]);
}

export function buildOpenApi(): Json {
  const comps = new Components();
  comps.convert(errorEnvelope, 'output');
  comps.convert(edgeErrorEnvelope, 'output');
  const paths: Record<string, Json> = {};
  for (const r of ROUTES) {
    const op = operation(r, comps);
    if (!op) continue;
    (paths[r.path] ??= {})[r.method.toLowerCase()] = op;
  }
  const header = (description: string, schema: Json = { type: 'string' }) => ({ description, schema });
  return {
    openapi: '3.1.0',
    info: {
      title: 'Media marketplace API',
      version: API_VERSION,
      description:
        'Buyers post jobs asking for photos, audio or video and pay per approved file from escrowed credits; workers upload; ' +
        'every submission is scored 1 to 5 stars. Authenticate with `Authorization: Bearer <key>` (buyer API keys) or a worker token. ' +
        'Every mutating POST takes an `Idempotency-Key`; lists are `{object:"list", data, has_more, next_cursor}`; ' +
        'every error is `{"error":{"type","message","request_id","details"?}}`.',
    },
    servers: [{ url: '/', description: 'This service' }],
    tags: ['Account', 'Jobs', 'Files', 'Exports', 'Submissions', 'API keys', 'Webhooks', 'Billing', 'Organization', 'Workers', 'Reference'].map((name) => ({ name })),
    paths,
    components: {
      securitySchemes: {
        ApiKey: { type: 'http', scheme: 'bearer', bearerFormat: 'svc_live_sk_… or svc_test_sk_…', description: 'A buyer API key; test keys run the sandbox.' },
        WorkerToken: { type: 'http', scheme: 'bearer', bearerFormat: 'svc_wkr_…', description: 'A worker token from the worker signup.' },
      },
      parameters: {
        IdempotencyKeyRequired: {
          name: 'Idempotency-Key',
          in: 'header',
          required: true,
          description: 'Up to 255 characters. The same key with the same body replays the first answer for 24 hours.',
          schema: { type: 'string', minLength: 1, maxLength: 255 },
        },
        IdempotencyKeyOptional: {
          name: 'Idempotency-Key',
          in: 'header',
          required: false,
          description: 'Honoured when sent: the same key with the same body replays the first answer for 24 hours.',
          schema: { type: 'string', minLength: 1, maxLength: 255 },
        },
        PreferWait: {
          name: 'Prefer',
          in: 'header',
          required: false,
          description: '`wait=N` (1..60): hold the answer until the status changes or N seconds pass. The answer says what was applied in Preference-Applied.',
          schema: { type: 'string', pattern: '^wait=\\d+$' },
        },
      },
      headers: {
        'X-Request-Id': header('`req_…`; equals `error.request_id` on errors.'),
        'X-RateLimit-Limit': header('Requests allowed in the window that binds first.'),
        'X-RateLimit-Remaining': header('Requests left in that window.'),
        'X-RateLimit-Reset': header('Unix time (seconds) when that window resets.'),
        'X-Service-Credits-Remaining': header('available_cents of the key’s environment as read, strongly consistent, when the request began: a request that moves credits (a job’s escrow, a refund) answers with the balance before its change; GET /v1/billing/credits or the next response shows the balance after.'),
        'Retry-After': header('Seconds to wait before retrying.'),
        'Idempotent-Replayed': header('`true` when this is the stored answer of an earlier request with the same Idempotency-Key.'),
        'Preference-Applied': header('`wait=N`: the wait that was applied.'),
      },
      schemas: comps.schemas,
    },
  };
}
