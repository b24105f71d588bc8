import { routeWithoutIdempotencyKey } from '../../shared/http/route-without-key';
import { jobWithSummary } from '../../shared/jobs';
import { parsePreferWait } from '../../shared/long-poll';
import { waitForStatusChange } from '../../shared/jobs/wait';
import { stillAuthenticated } from '../../shared/auth/authenticate';

// D20/D46/D57: `Prefer: wait=N` holds until the status changes (or N s), and every answer to a
// request that carried it says what was applied.
export const handler = routeWithoutIdempotencyKey('jobs.get', {}, async (req) => {
  const wait = parsePreferWait(req.headers['prefer']);
  if (wait === null) return { body: jobWithSummary(req.resource) };
  const item = await waitForStatusChange(req.resource, wait, () => stillAuthenticated(req.buyer));
  return { body: jobWithSummary(item), headers: { 'Preference-Applied': `wait=${wait}`, Vary: 'Prefer' } };
});
