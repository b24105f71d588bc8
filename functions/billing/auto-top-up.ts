import { messageConsumer } from '../../shared/work/consumer';
import { runAutoTopUp, topUpRequestOf } from '../../shared/billing/auto-top-up';

/** Queue `top-ups` (D34): a crossing of the low-balance threshold → the auto top-up, once. */
export const handler = messageConsumer('top-ups', (body) => body, async (body) => {
  const { orgId, env, eventId } = await topUpRequestOf(body);
  const outcome = await runAutoTopUp(orgId, env, eventId);
  return outcome === null ? 'skipped' : outcome === 'failed' ? 'refused' : 'stored';
});
