/** Long-poll of GET /v1/jobs/{id} (D20, D46, D57; ../long-poll.ts): a completed or cancelled job answers at once. */
import { untilStatusChanges } from '../long-poll';
import { getJobItem } from './index';

const TERMINAL = ['completed', 'cancelled'];

export function waitForStatusChange(item: Record<string, unknown>, seconds: number): Promise<Record<string, unknown>> {
  return untilStatusChanges(item, seconds, TERMINAL, () => getJobItem(item.id as string, false));
}
