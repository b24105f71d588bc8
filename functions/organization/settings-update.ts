import * as z from '../../shared/zod';
import { routeWithoutIdempotencyKey } from '../../shared/http/route-without-key';
import { updateSettings } from '../../shared/orgs';

// D52 bounds.
const body = z.strictObject({
  auto_top_up_enabled: z.optional(z.boolean()),
  auto_top_up_threshold_cents: z.optional(z.int().check(z.gte(0), z.lte(1_000_000))),
  auto_top_up_amount_cents: z.optional(z.int().check(z.gte(1000), z.lte(100_000))),
});

export const handler = routeWithoutIdempotencyKey('organization.settings.update', { body }, async (req) => ({
  body: await updateSettings(req.ctx, req.buyer, req.body),
}));
