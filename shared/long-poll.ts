/**
 * Long-poll of a resource's status (`Prefer: wait=N`; D20, D46, D57), shared by
 * GET /v1/jobs/{id} and GET /v1/exports/{id}.
 *
 * The wait reads the item with eventually consistent GetItems (half the read cost, any replica) at
 * growing intervals (250 ms doubling to 2 s), so a 60 s wait costs about 35 reads and the
 * connection is idle between them; it answers at once for an item already in a terminal status.
 * An eventually consistent read may come from a replica that has not seen the latest write, so it
 * may show a status *older* than the one at the start: a read whose status differs is confirmed by
 * a strongly consistent read, and only a confirmed change answers (else the wait goes on), and the
 * answer after the whole wait is read consistently too. So a wait never answers with an older
 * status or counters than the caller already had (one consistent read more per wait). The deadline uses the
 * real monotonic clock (the injectable domain clock may be frozen by tests).
 *
 * A wait holds a slot (./long-poll-slots.ts: so many per route and per organization at once),
 * taken only when it really waits and given back when it answers; a wait refused a slot answers
 * 429 or 503 with Retry-After instead.
 *
 * D6: a revoke is immediate, also for a request already waiting: a wait that held the request
 * checks the key again before it answers (`stillValid`), so a key revoked (or a rotated-out secret
 * that expired) meanwhile gets 401, not the resource.
 */
import { config } from './config';
import { logger } from './logger';
import { takeWaitSlot } from './long-poll-slots';

export const WAIT_MAX_SECONDS = 60;
const FIRST_INTERVAL_MS = 250;
const MAX_INTERVAL_MS = 2000;

/** The wait asked for in a `Prefer` header (RFC 7240 list), clamped (D20); null when absent/invalid. */
export function parsePreferWait(header: string | undefined): number | null {
  if (!header) return null;
  for (const part of header.split(',')) {
    const m = /^\s*wait\s*=\s*"?(\d+)"?\s*(;.*)?$/i.exec(part); // any length: a larger wait clamps (D20)
    if (m) return Math.min(Number(m[1]), WAIT_MAX_SECONDS, config().longPollMaxSeconds);
  }
  return null;
}

/**
 * `item` as it is when its status differs from `item.status`, or after `seconds` (at most
 * WAIT_MAX_SECONDS); `item` at once when its status is one of `terminal` (D46). `read` reads the
 * item again, strongly consistent or not (null when it is gone: the last item read is kept). `holder`: whose wait it is, on
 * which route (the slot it takes).
 */
export async function untilStatusChanges<T extends { status?: unknown }>(
  item: T,
  seconds: number,
  terminal: readonly unknown[],
  read: (consistent: boolean) => Promise<T | null | undefined>,
  stillValid: () => Promise<void>,
  holder: { route: string; orgId: string },
): Promise<T> {
  const initial = item.status;
  if (seconds <= 0 || terminal.includes(initial)) return item;
  const held = Math.min(seconds, WAIT_MAX_SECONDS);
  const slot = await takeWaitSlot(holder.route, holder.orgId, held);
  try {
    const deadline = performance.now() + held * 1000;
    let interval = FIRST_INTERVAL_MS;
    let current = item;
    let changed = false;
    for (;;) {
      const left = deadline - performance.now();
      if (left <= 0) break;
      await new Promise((r) => setTimeout(r, Math.min(interval, left)));
      interval = Math.min(interval * 2, MAX_INTERVAL_MS);
      const seen = await read(false);
      if (!seen || seen.status === initial) continue;
      current = (await read(true)) ?? seen;
      if (current.status !== initial) {
        changed = true;
        break;
      }
    }
    if (!changed) current = (await read(true)) ?? current;
    await stillValid();
    return current;
  } finally {
    // A slot not given back lapses at its lease's end: the answer does not wait on it.
    await slot.release().catch((err: Error) => logger.warn('long poll: could not give back its slot; it lapses', { error: err }));
  }
}
