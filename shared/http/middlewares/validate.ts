/**
 * Strict zod validation at the edge (D4): unknown fields and out-of-bounds values are 400
 * `validation_error` with `details[].field`; queries are validated the same way.
 */
import type middy from '@middy/core';
import type { APIGatewayProxyEvent, APIGatewayProxyResult } from 'aws-lambda';
import type { core } from 'zod';
import { errors, type ErrorDetail } from '../../errors';
import { state } from '../state';
import { ApiError } from '../../errors';
import { assertSendableText } from '../../sendable-text';

/**
 * D11: a refused body on a route that takes an Idempotency-Key is an outcome like any other 4xx,
 * stored under the key and replayed. Validation therefore does not throw on such routes; it parks
 * the error here and the idempotency middleware (which runs next) takes the key, then raises it.
 */
const parked = new WeakMap<object, ApiError>();

/** The validation error parked for this request, if any (taken once). */
export function takeParkedValidationError(event: object): ApiError | undefined {
  const e = parked.get(event);
  parked.delete(event);
  return e;
}

export function issuesToDetails(issues: readonly core.$ZodIssue[], prefix = ''): ErrorDetail[] {
  const out: ErrorDetail[] = [];
  for (const i of issues) {
    const base = [prefix, ...i.path.map(String)].filter(Boolean).join('.');
    if (i.code === 'unrecognized_keys') {
      for (const k of i.keys) {
        out.push({ field: base ? `${base}.${k}` : k, message: `Unknown field "${k}".`, code: 'unknown_field' });
      }
    } else {
      out.push({ field: base || undefined, message: i.message, code: i.code });
    }
  }
  return out;
}

/**
 * Bodies are JSON (D4: malformed JSON is 400 invalid_request). The Content-Type is not insisted
 * on: `curl -d '{...}'` sends `application/x-www-form-urlencoded`, and a JSON body sent that way is
 * still taken as JSON. Multipart bodies (uploads) are left raw for their handler.
 */
function parseJson(raw: string | null, contentType: string | undefined, o: { base64: boolean; multipart: boolean }): unknown {
  const ctype = (contentType ?? '').toLowerCase();
  if (ctype.startsWith('multipart/')) {
    if (o.multipart) return undefined; // the upload routes read the form themselves
    throw errors.invalidRequest('This route takes a JSON body, not a multipart form; send a JSON object (Content-Type: application/json).');
  }
  if (!raw || raw.trim() === '') return undefined;
  // A body API Gateway passed base64-encoded (sent with a binary Content-Type) is still UTF-8 JSON text.
  const text = o.base64 ? Buffer.from(raw, 'latin1').toString('utf8') : raw;
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    throw errors.invalidRequest('The request body is not valid JSON; send a JSON object (Content-Type: application/json).');
  }
  // JSON may name a key "__proto__" (also with escaped letters: any `\u` escape sends the body to
  // the walk), but a JavaScript object cannot hold it: the schemas would drop it silently. A key
  // "constructor" is held, but DynamoDB's marshaller then takes the object for a class instance and
  // refuses to store it (a 500 at the write). Both are refused by name, wherever they are.
  if (text.includes('proto') || text.includes('constructor') || text.includes('\\u')) {
    const found = reservedKeyPaths(json, '');
    if (found.length) {
      throw errors.validation(
        'The request body is invalid.',
        found.map(({ field, key }) => ({ field, code: 'reserved_key', message: `The key "${key}" cannot be stored; use another name.` })),
      );
    }
  }
  return json;
}

const RESERVED_KEYS = new Set(['__proto__', 'constructor']);

/** The paths of every reserved key; iterative, so a deeply nested body cannot exhaust the stack. */
function reservedKeyPaths(root: unknown, rootPath: string): { field: string; key: string }[] {
  const out: { field: string; key: string }[] = [];
  const todo: [unknown, string][] = [[root, rootPath]];
  while (todo.length) {
    const [v, at] = todo.pop()!;
    if (v === null || typeof v !== 'object') continue;
    for (const [k, x] of Object.entries(v)) {
      const path = at ? `${at}.${k}` : k;
      if (RESERVED_KEYS.has(k)) out.push({ field: path, key: k });
      else todo.push([x, path]);
    }
  }
  return out.reverse();
}

/** A request schema: zod 4's full API or zod/mini (both share the core and its `safeParse`). */
export type RequestSchema = core.$ZodType & {
  safeParse(data: unknown): { success: true; data: unknown; error?: undefined } | { success: false; data?: undefined; error: { issues: core.$ZodIssue[] } };
};

export interface Schemas {
  body?: RequestSchema;
  query?: RequestSchema;
}

export function validation(schemas: Schemas): middy.MiddlewareObj<APIGatewayProxyEvent, APIGatewayProxyResult> {
  return {
    before: async (request) => {
      const s = state(request.event);
      try {
        check(s);
      } catch (err) {
        if (!(err instanceof ApiError) || s.route.idempotency === 'none') throw err;
        parked.set(request.event, err);
      }
    },
  };

  function check(s: ReturnType<typeof state>): void {
    // D42: the body is looked at only after authentication, scope and the resource.
    s.json = parseJson(s.rawBodyText, s.headers['content-type'], { base64: s.bodyBase64, multipart: s.route.multipart === true });
    if (s.repeatedQuery?.length) {
      throw errors.validation(
        'Invalid query parameters.',
        s.repeatedQuery.map((k) => ({ field: k, code: 'repeated_parameter', message: `The query parameter "${k}" is given more than once; send it once.` })),
      );
    }
    if (schemas.query) {
      const r = schemas.query.safeParse(s.rawQuery);
      if (!r.success) throw errors.validation('Invalid query parameters.', issuesToDetails(r.error.issues));
      s.query = r.data;
    } else {
      // A route without query parameters names each one it was sent (docs/decisions.md), as a
      // strict body names an unknown field.
      const unknown = Object.keys(s.rawQuery ?? {});
      if (unknown.length) {
        throw errors.validation(
          'Invalid query parameters.',
          unknown.map((k) => ({ field: k, code: 'unknown_field', message: `Unknown query parameter "${k}": this route takes none.` })),
        );
      }
      s.query = {};
    }
    if (schemas.body) {
      const r = schemas.body.safeParse(s.json === undefined ? {} : s.json);
      if (!r.success) throw errors.validation('The request body is invalid.', issuesToDetails(r.error.issues));
      // Text an event could not carry through SQS is refused here, not dead-lettered later.
      assertSendableText(r.data);
      s.body = r.data;
    } else if (s.json !== undefined && s.json !== null && !(typeof s.json === 'object' && Object.keys(s.json as object).length === 0)) {
      // D4: an unknown body field is named, as a strict body schema names it; a body that is not
      // an object (an array, a string) has no field to name.
      const fields = typeof s.json === 'object' && !Array.isArray(s.json) ? Object.keys(s.json as object) : [];
      throw errors.validation(
        'This endpoint takes no request body.',
        fields.length
          ? fields.map((k) => ({ field: k, code: 'unknown_field', message: `Unknown field "${k}": this endpoint takes no request body.` }))
          : [{ message: 'unexpected body', code: 'unexpected_body' }],
      );
    }
  }
}
