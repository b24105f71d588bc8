import * as z from '../../shared/zod';
import { route } from '../../shared/http/route';
import { createExport } from '../../shared/exports';
import { EXPORT_FORMATS } from '../../shared/exports/model';

const body = z.strictObject({
  format: z.enum(EXPORT_FORMATS),
  min_score: z.optional(z.int().check(z.gte(1), z.lte(5))),
});

// D73: 202 with the pending export; the `exports` queue consumer builds it.
export const handler = route('jobs.exports.create', { body }, async (req) => ({
  status: 202,
  body: await createExport(req.ctx, req.buyer, req.resource, req.body),
}));
