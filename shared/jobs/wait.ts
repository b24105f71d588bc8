/**
 * Long-poll of GET /v1/jobs/{id} (D20, D46, D57): `Prefer: wait=N`.
 *
 * The wait reads the job with eventually consistent GetItems (half the read cost, any replica) at
 * growing intervals (250 ms doubling to 2 s), so a 60 s wait costs about 35 reads and the
 * connection is idle between them; it answers on the first read whose status differs from the
 * status at the start, and at once for a completed or cancelled job. The deadline uses the real
 * monotonic clock (the injectable domain clock may be frozen by tests).
 */
import { config } from '../config';
import { getJobItem } from './index';

export const WAIT_MAX_SECONDS = 60;
const FIRST_INTERVAL_MS = 250;
const MAX_INTERVAL_MS = 2000;

/** The wait asked for in a `Prefer` header (RFC 7240 list), clamped (D20); null when absent/invalid. */
export function parsePreferWait(header: string | undefined): number | null {
  if (!header) return null;
  for (const part of header.split(',')) {
    const m = /^\s*wait\s*=\s*"?(\d{1,6})"?\s*(;.*)?$/i.exec(part);
    if (m) return Math.min(Number(m[1]), WAIT_MAX_SECONDS, config().longPollMaxSeconds);
  }
  return null;
}

const TERMINAL = new Set(['completed', 'cancelled']);

export async function waitForStatusChange(item: Record<string, unknown>, seconds: number): Promise<Record<string, unknown>> {
  const initial = item.status;
  if (seconds <= 0 || TERMINAL.has(initial as string)) return item; // D46
  const deadline = performance.now() + seconds * 1000;
  let interval = FIRST_INTERVAL_MS;
  let current = item;
  for (;;) {
    const left = deadline - performance.now();
    if (left <= 0) return current;
    await new Promise((r) => setTimeout(r, Math.min(interval, left)));
    interval = Math.min(interval * 2, MAX_INTERVAL_MS);
    const fresh = await getJobItem(item.id as string, false);
    if (fresh) current = fresh;
    if (current.status !== initial) return current;
  }
}
