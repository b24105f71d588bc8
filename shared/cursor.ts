/**
 * Opaque, tamper-evident list cursors (D12): base64url(JSON) + "." + HMAC-SHA256, bound to the
 * query they continue (tenant, filters), so a cursor edited, forged or replayed on another query
 * is refused with 400 validation_error on `cursor`.
 */
import { createHmac, timingSafeEqual } from 'node:crypto';
import { config } from './config';
import { errors } from './errors';

function sign(payload: string): string {
  return createHmac('sha256', config().cursorSecret).update(payload).digest('base64url');
}

export function encodeCursor(position: Record<string, unknown>, binding: string): string {
  const payload = Buffer.from(JSON.stringify({ p: position, b: binding })).toString('base64url');
  return `${payload}.${sign(payload)}`;
}

export function decodeCursor(cursor: string, binding: string): Record<string, unknown> {
  const bad = () => errors.validation('The cursor is invalid; pass the next_cursor of the previous page unchanged.', [
    { field: 'cursor', message: 'invalid or tampered cursor', code: 'invalid_cursor' },
  ]);
  const [payload, mac] = cursor.split('.');
  if (!payload || !mac || cursor.split('.').length !== 2) throw bad();
  const expected = Buffer.from(sign(payload));
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
