/** Reusable zod pieces for query strings and bodies (strict objects everywhere, D4). */
import * as z from '../zod';

/** D12: limit 1..100 (default 20), opaque cursor. */
export const pagination = {
  limit: z._default(z.coerce.number().check(z.int(), z.gte(1), z.lte(100)), 20),
  cursor: z.optional(z.string().check(z.minLength(1), z.maxLength(2048))),
};

export const isoTimestamp = z.iso.datetime({ offset: true });

export const listQuery = <T extends z.core.$ZodLooseShape>(shape: T) => z.strictObject({ ...pagination, ...shape });
