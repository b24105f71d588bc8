/**
 * A plain write refused because a transaction holds its item (TransactionConflictException, which
 * the SDK does not retry) is retried with the commit's bounded backoff; past the retries it is
 * contention (409 with Retry-After), never the raw error (a 500).
 */
import { COMMIT_ATTEMPTS, retryingConflicts } from '../../shared/db/conflicts';
import { Contention } from '../../shared/errors';

const conflict = () => Object.assign(new Error('Transaction is ongoing for the item'), { name: 'TransactionConflictException' });

test('a write that meets a transaction is tried again and succeeds once the transaction is done', async () => {
  let calls = 0;
  const out = await retryingConflicts(async () => {
    if (++calls < 3) throw conflict();
    return 'written';
  });
  expect([out, calls]).toEqual(['written', 3]);
});

test('a write that keeps meeting transactions ends as contention after the commit\'s attempts, not as the raw error', async () => {
  let calls = 0;
  const err = await retryingConflicts(async () => {
    calls++;
    throw conflict();
  }).catch((e: unknown) => e);
  expect(err).toBeInstanceOf(Contention);
  expect(calls).toBe(COMMIT_ATTEMPTS);
});

test('any other error is not retried', async () => {
  let calls = 0;
  const err = await retryingConflicts(async () => {
    calls++;
    throw Object.assign(new Error('no'), { name: 'ConditionalCheckFailedException' });
  }).catch((e: unknown) => e as Error);
  expect([(err as Error).name, calls]).toEqual(['ConditionalCheckFailedException', 1]);
});
