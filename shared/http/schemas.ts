/** Reusable zod pieces for query strings and bodies (strict objects everywhere, D4). */
import * as z from 'zod';

/** D12: limit 1..100 (default 20), opaque cursor. */
export const pagination = {
  limit: z.coerce.number().int().min(1).max(100).default(20),
  cursor: z.string().min(1).max(2048).optional(),
};

export const isoTimestamp = z.iso.datetime({ offset: true });

export const listQuery = <T extends z.ZodRawShape>(shape: T) => z.strictObject({ ...pagination, ...shape });

/** A cursor binding: the tenant and every filter of the request, in a stable order. */
export function binding(parts: Record<string, unknown>): string {
  return JSON.stringify(Object.keys(parts).sort().map((k) => [k, parts[k] ?? null]));
}
