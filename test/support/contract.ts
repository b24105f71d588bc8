/**
 * The contract check (D72): every response the API tests receive through the harness is validated
 * against the served OpenAPI document (shared/openapi/openapi.json): its status must be documented
 * for that operation and its JSON body must match the documented schema. A mismatch throws, so the
 * document cannot drift from the code. Routes the document does not describe yet are left to
 * test/unit/openapi-coverage.test.ts, which lists them and fails.
 */
import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import Ajv2020, { type ValidateFunction } from 'ajv/dist/2020';
import { matchRoute } from '../../shared/manifest/routes';

type Json = Record<string, any>;

let state: { doc: Json; ajv: Ajv2020; defs: Json } | null = null;
const compiled = new Map<string, ValidateFunction>();

/** Component references become local `$defs` references, so each response schema stands alone. */
function localRefs(v: unknown): any {
  if (Array.isArray(v)) return v.map(localRefs);
  if (v && typeof v === 'object') {
    return Object.fromEntries(
      Object.entries(v).map(([k, x]) => [k, k === '$ref' && typeof x === 'string' ? x.replace('#/components/schemas/', '#/$defs/') : localRefs(x)]),
    );
  }
  return v;
}

function load() {
  if (!state) {
    const doc = JSON.parse(readFileSync(resolve(__dirname, '../../shared/openapi/openapi.json'), 'utf8')) as Json;
    const ajv = new Ajv2020({ strict: false, allErrors: true, validateFormats: false });
    state = { doc, ajv, defs: localRefs(doc.components?.schemas ?? {}) };
  }
  return state;
}

export class ContractViolation extends Error {
  override name = 'ContractViolation';
}

export interface CheckedResponse {
  status: number;
  headers: Record<string, string>;
  text: string;
  json: unknown;
}

/** Throws ContractViolation when the response is not what the document promises. */
export function checkContract(method: string, url: string, res: CheckedResponse): void {
  const { doc } = load();
  const pathname = new URL(url, 'http://local').pathname;
  const match = matchRoute(method.toUpperCase(), pathname);
  const where = `${method.toUpperCase()} ${pathname} → ${res.status}`;
  const ctype = (res.headers['content-type'] ?? '').split(';')[0]!.trim();

  if (!match.route) {
    // Not an API route (unknown path, local-only pages): errors still use the envelope.
    if (ctype === 'application/json' && res.status >= 400) validate(`Error`, { $ref: '#/components/schemas/Error' }, res.json, where);
    return;
  }
  const op = doc.paths?.[match.route.path]?.[method.toLowerCase()] as Json | undefined;
  if (!op) return; // not documented yet: reported by the coverage test
  const response = op.responses?.[String(res.status)] as Json | undefined;
  if (!response) {
    throw new ContractViolation(
      `${where}: status ${res.status} is not documented for ${op.operationId} (documented: ${Object.keys(op.responses ?? {}).join(', ')}). Body: ${res.text.slice(0, 300)}`,
    );
  }
  if (!response.content) {
    if (res.text !== '') throw new ContractViolation(`${where}: documented without a body, but one came: ${res.text.slice(0, 200)}`);
    return;
  }
  if (!response.content[ctype]) {
    throw new ContractViolation(`${where}: Content-Type ${ctype || '(none)'} is not documented (documented: ${Object.keys(response.content).join(', ')}).`);
  }
  if (ctype !== 'application/json') return;
  validate(`${op.operationId} ${res.status}`, response.content[ctype].schema, res.json, where);
}

function validate(key: string, schema: Json, body: unknown, where: string): void {
  const { ajv, defs } = load();
  let fn = compiled.get(key);
  if (!fn) {
    fn = ajv.compile({ ...localRefs(schema), $defs: defs });
    compiled.set(key, fn);
  }
  if (!fn(body)) {
    const errs = (fn.errors ?? []).slice(0, 5).map((e) => `${e.instancePath || '(root)'} ${e.message}${e.params ? ` ${JSON.stringify(e.params)}` : ''}`);
    throw new ContractViolation(`${where}: the body does not match the documented schema:\n  ${errs.join('\n  ')}\nBody: ${JSON.stringify(body).slice(0, 500)}`);
  }
}
