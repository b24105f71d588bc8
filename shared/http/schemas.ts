/** Reusable zod pieces for query strings and bodies (strict objects everywhere, D4). */
import * as z from '../zod';

/**
 * The longest cursor a list route accepts. The web ACL blocks a query string over 2,048 bytes
 * (AWS's core rule set, shared/http/edge.ts), so a cursor and the other parameters of its list
 * must fit in that together: the longest cursor the service writes is under 800 characters (the
 * submissions list, every filter set: its binding holds them all, and the range its first page
 * resolved), and the longest other parameters of a list take under 250 bytes.
 */
export const CURSOR_MAX_CHARS = 1024;

/**
 * A cursor longer than any the service writes is not one of its cursors: the same 400 as a
 * tampered one (`invalid_cursor`, shared/cursor.ts), before it is read. Aborts, so the length
 * check after it (which puts the bound in the OpenAPI document) adds no second detail.
 */
const cursorNotTooLong = z.check<string>((ctx) => {
  if (ctx.value.length <= CURSOR_MAX_CHARS) return;
  ctx.issues.push({
    // issuesToDetails (./middlewares/validate.ts) reports an issue's code as its detail's code.
    code: 'invalid_cursor' as 'custom',
    input: ctx.value,
    message: `A cursor has at most ${CURSOR_MAX_CHARS} characters; pass the next_cursor of the previous page unchanged.`,
    continue: false,
  });
});

/** D12: limit 1..100 (default 20), opaque cursor. */
export const pagination = {
  limit: z._default(z.coerce.number().check(z.int(), z.gte(1), z.lte(100)), 20),
  cursor: z.optional(z.string().check(z.minLength(1), cursorNotTooLong, z.maxLength(CURSOR_MAX_CHARS))),
};

export const isoTimestamp = z.iso.datetime({ offset: true });

export const listQuery = <T extends z.core.$ZodLooseShape>(shape: T) => z.strictObject({ ...pagination, ...shape });
