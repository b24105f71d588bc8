/**
 * Opaque, tamper-evident list cursors (D12): base64url(JSON) + "." + HMAC-SHA256, bound to the
 * query they continue (tenant, filters), so a cursor edited, forged or replayed on another query
 * is refused with 400 validation_error on `cursor`.
 *
 * The HMAC key is the `cursor` secret (D63), read at run time from Secrets Manager (deployed, cached
 * for minutes by shared/secrets) or the data folder's secrets file (local); never the environment.
 */
import { createHmac, timingSafeEqual } from 'node:crypto';
import { errors } from './errors';
import { getSecret } from './secrets';

/**
 * A cursor binding: the tenant and every filter of the request, in a stable order. (Here, not
 * beside the query schemas, so the domain modules that page do not load zod.)
 */
export function binding(parts: Record<string, unknown>): string {
  return JSON.stringify(Object.keys(parts).sort().map((k) => [k, parts[k] ?? null]));
}

async function sign(payload: string): Promise<string> {
  return createHmac('sha256', await getSecret('cursor')).update(payload).digest('base64url');
}

export async function encodeCursor(position: Record<string, unknown>, binding: string): Promise<string> {
  const payload = Buffer.from(JSON.stringify({ p: position, b: binding })).toString('base64url');
  return `${payload}.${await sign(payload)}`;
}

export async function decodeCursor(cursor: string, binding: string): Promise<Record<string, unknown>> {
  const bad = () => errors.validation('The cursor is invalid; pass the next_cursor of the previous page unchanged.', [
    { field: 'cursor', message: 'invalid or tampered cursor', code: 'invalid_cursor' },
  ]);
  const [payload, mac] = cursor.split('.');
  if (!payload || !mac || cursor.split('.').length !== 2) throw bad();
  const expected = Buffer.from(await sign(payload));
  const given = Buffer.from(mac);
  if (expected.length !== given.length || !timingSafeEqual(expected, given)) throw bad();
  let parsed: { p?: unknown; b?: unknown };
  try {
    parsed = JSON.parse(Buffer.from(payload, 'base64url').toString('utf8'));
  } catch {
    throw bad();
  }
  if (parsed.b !== binding || !parsed.p || typeof parsed.p !== 'object') throw bad();
  return parsed.p as Record<string, unknown>;
}
