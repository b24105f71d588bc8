/**
 * What DynamoDB answers when writes meet a transaction in progress, and how long we wait it out:
 * the bounded backoff of a contended commit (Tx.commit) and of a plain write refused with
 * `TransactionConflictException`, which the SDK does not retry.
 */
import { Contention } from '../errors';

/** Bounded retries of a contended commit: full jitter, 20 ms doubling, capped at 500 ms (~2 s worst case). */
export const COMMIT_ATTEMPTS = 9;
const BASE_BACKOFF_MS = 20;
const MAX_BACKOFF_MS = 500;

/** The wait before retry `attempt + 1` of a contended write. */
export const contentionBackoff = (attempt: number): Promise<void> =>
  new Promise((r) => setTimeout(r, Math.random() * Math.min(MAX_BACKOFF_MS, BASE_BACKOFF_MS * 2 ** attempt)));

/**
 * A plain write (PutItem, UpdateItem, DeleteItem) on an item that a transaction is committing at
 * that moment: DynamoDB refuses it with `TransactionConflictException` (and changes nothing), and
 * the SDK does not retry it. Retried here with the same bounded backoff as a contended commit;
 * past the retries it is contention, as for a commit (409 with Retry-After, never a 500).
 */
export async function retryingConflicts<T>(write: () => Promise<T>): Promise<T> {
  for (let attempt = 0; ; attempt++) {
    try {
      return await write();
    } catch (err) {
      if ((err as Error).name !== 'TransactionConflictException') throw err;
      if (attempt + 1 >= COMMIT_ATTEMPTS) throw new Contention(attempt + 1);
      await contentionBackoff(attempt);
    }
  }
}
