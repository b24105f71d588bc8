import { routeWithoutIdempotencyKey } from '../../shared/http/route-without-key';
import { presentExport, waitForExportChange } from '../../shared/exports';
import { parsePreferWait } from '../../shared/long-poll';
import { stillAuthenticated } from '../../shared/auth/authenticate';
import type { ExportItem } from '../../shared/exports/model';

// D73 with D20/D57: `Prefer: wait=N` holds until the status changes (or N s).
export const handler = routeWithoutIdempotencyKey('exports.get', {}, async (req) => {
  const item = req.resource as unknown as ExportItem;
  const wait = parsePreferWait(req.headers['prefer']);
  if (wait === null) return { body: await presentExport(item) };
  const current = await waitForExportChange(item, wait, () => stillAuthenticated(req.buyer));
  return { body: await presentExport(current), headers: { 'Preference-Applied': `wait=${wait}`, Vary: 'Prefer' } };
});
