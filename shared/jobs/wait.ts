/** Long-poll of GET /v1/jobs/{id} (D20, D46, D57; ../long-poll.ts): a completed or cancelled job answers at once. */
import { untilStatusChanges } from '../long-poll';
import { getJobItem } from './index';

const TERMINAL = ['completed', 'cancelled'];

/** `stillValid` checks the caller's key again before a held request answers (D6). */
export function waitForStatusChange(item: Record<string, unknown>, seconds: number, stillValid: () => Promise<void>): Promise<Record<string, unknown>> {
  return untilStatusChanges(item, seconds, TERMINAL, (consistent) => getJobItem(item.id as string, consistent), stillValid, { route: 'jobs.get', orgId: item.org_id as string });
}
