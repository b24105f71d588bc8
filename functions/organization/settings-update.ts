import * as z from 'zod';
import { route } from '../../shared/http/route';
import { updateSettings } from '../../shared/orgs';

// D52 bounds.
const body = z.strictObject({
  auto_top_up_enabled: z.boolean().optional(),
  auto_top_up_threshold_cents: z.number().int().min(0).max(1_000_000).optional(),
  auto_top_up_amount_cents: z.number().int().min(1000).max(100_000).optional(),
});

export const handler = route('organization.settings.update', { body }, async (req) => ({
  body: await updateSettings(req.ctx, req.buyer, req.body),
}));
