/**
 * What DynamoDB answers when writes meet a transaction in progress, and how long we wait it out:
 * the bounded backoff of a contended commit (Tx.commit) and of a plain write refused with
 * `TransactionConflictException`, which the SDK does not retry.
 */
import { Contention } from '../errors';
import { timeLeftMs } from '../invocation-deadline';

/**
 * Whatever its own budget says, a loop tries again only while the invocation has this much left
 * (shared/invocation-deadline.ts): one more attempt of a write (its backoff, at most 500 ms, and the
 * call), or one more round of a rebuild (a fresh read, then a commit, whose own retries stop at
 * the first bound). Past them the caller gives up as it does at its budget's end: a route answers
 * 409 with Retry-After, a consumer hands that record back, where Lambda would have stopped the
 * invocation (a 504; the whole batch back).
 */
export const ATTEMPT_RESERVE_MS = 1_000;
export const ROUND_RESERVE_MS = 3_000;

/**
 * Bounded retries of a contended commit: full jitter, 20 ms doubling, capped at 500 ms. A contended
 * write is tried at least `COMMIT_ATTEMPTS` times and for at least `CONTENTION_BUDGET_MS` from its
 * first attempt (whichever ends later, at most `MAX_COMMIT_ATTEMPTS`): a count alone gave up after
 * about 1 to 2 s, which a burst of 20 creations on one balance outlasted on a loaded machine; a
 * time alone would give few attempts where each one is slow. Well inside a route's 28 s.
 */
export const COMMIT_ATTEMPTS = 9;
export const CONTENTION_BUDGET_MS = 4_000;
export const MAX_COMMIT_ATTEMPTS = 30;
const BASE_BACKOFF_MS = 20;
const MAX_BACKOFF_MS = 500;

/** Whether a write contended on each of its `attempts` tries, the first at `since` (Date.now()), may try again. */
export const mayRetryContention = (attempts: number, since: number): boolean =>
  attempts < MAX_COMMIT_ATTEMPTS && (attempts < COMMIT_ATTEMPTS || Date.now() - since < CONTENTION_BUDGET_MS) && timeLeftMs() > ATTEMPT_RESERVE_MS;

/**
 * How long a caller that rebuilds its transaction on a fresh read (`withJobRetry`,
 * `retryContended`) keeps rebuilding after contention, from its first round. Each contended round
 * already spent Tx.commit's own budget (at least `CONTENTION_BUDGET_MS`), so a count of rounds
 * alone could outrun a route's 28 s time-out; with this bound the last round starts before 10 s
 * and the caller answers 409 with Retry-After well inside it. A stale snapshot (a failed
 * condition) is not contention: it is rebuilt within `STALE_REBUILD_BUDGET_MS`.
 */
export const REBUILD_BUDGET_MS = 10_000;

/** Whether a caller whose first round began at `since` (Date.now()) may rebuild after contention. */
export const mayRebuildAfterContention = (since: number): boolean => Date.now() - since < REBUILD_BUDGET_MS && timeLeftMs() > ROUND_RESERVE_MS;

/**
 * How long a caller rebuilds on a stale snapshot (a failed condition: another writer changed what
 * it read), from its first round, besides its own count of rounds. A stale round is usually quick,
 * but one may first have waited out Tx.commit's contention budget (at least
 * `CONTENTION_BUDGET_MS`) before its condition failed, so a count alone (20 or 30 rounds) could
 * outrun a route's 28 s time-out and end in a 504 instead of an answer. With this bound the last
 * round starts before 16 s and ends (about 5 s at most) with a 409 and Retry-After inside it. A
 * burst of 20 creations on one balance takes a few seconds, far from it.
 */
export const STALE_REBUILD_BUDGET_MS = 16_000;

/** Whether a caller whose first round began at `since` (Date.now()) may rebuild a stale snapshot. */
export const mayRebuildStale = (since: number): boolean => Date.now() - since < STALE_REBUILD_BUDGET_MS && timeLeftMs() > ROUND_RESERVE_MS;

/** The wait before retry `attempt + 1` of a contended write. */
export const contentionBackoff = (attempt: number): Promise<void> =>
  new Promise((r) => setTimeout(r, Math.random() * Math.min(MAX_BACKOFF_MS, BASE_BACKOFF_MS * 2 ** attempt)));

/**
 * A plain write (PutItem, UpdateItem, DeleteItem) on an item that a transaction is committing at
 * that moment: DynamoDB refuses it with `TransactionConflictException` (and changes nothing), and
 * the SDK does not retry it. Retried here with the same bounded backoff as a contended commit;
 * past them it is contention, as for a commit (409 with Retry-After, never a 500).
 */
export async function retryingConflicts<T>(write: () => Promise<T>): Promise<T> {
  const since = Date.now();
  for (let attempt = 0; ; attempt++) {
    try {
      return await write();
    } catch (err) {
      if ((err as Error).name !== 'TransactionConflictException') throw err;
      if (!mayRetryContention(attempt + 1, since)) throw new Contention(attempt + 1);
      await contentionBackoff(attempt);
    }
  }
}
