/**
 * A plain write refused because a transaction holds its item (TransactionConflictException, which
 * the SDK does not retry) is retried with the commit's bounded backoff; past the retries it is
 * contention (409 with Retry-After), never the raw error (a 500).
 */
import { COMMIT_ATTEMPTS, CONTENTION_BUDGET_MS, MAX_COMMIT_ATTEMPTS, REBUILD_BUDGET_MS, STALE_REBUILD_BUDGET_MS, mayRebuildAfterContention, mayRebuildStale, mayRetryContention, retryingConflicts } from '../../shared/db/conflicts';
import { ROUTE_FUNCTION_TIMEOUT_SECONDS } from '../../shared/manifest/timeouts';
import { ConditionFailed, Contention } from '../../shared/errors';
import { withJobRetry } from '../../shared/work/slots';
import type { JobItem } from '../../shared/jobs/model';

const conflict = () => Object.assign(new Error('Transaction is ongoing for the item'), { name: 'TransactionConflictException' });

test('a write that meets a transaction is tried again and succeeds once the transaction is done', async () => {
  let calls = 0;
  const out = await retryingConflicts(async () => {
    if (++calls < 3) throw conflict();
    return 'written';
  });
  expect([out, calls]).toEqual(['written', 3]);
});

test('a write that keeps meeting transactions ends as contention after the commit\'s attempts and time, not as the raw error', async () => {
  let calls = 0;
  const since = Date.now();
  const err = await retryingConflicts(async () => {
    calls++;
    throw conflict();
  }).catch((e: unknown) => e);
  expect(err).toBeInstanceOf(Contention);
  expect(calls).toBeGreaterThanOrEqual(COMMIT_ATTEMPTS);
  expect(calls).toBeLessThanOrEqual(MAX_COMMIT_ATTEMPTS);
  expect(Date.now() - since).toBeGreaterThanOrEqual(CONTENTION_BUDGET_MS);
}, 20_000);

describe('how long contention is waited out', () => {
  let now = 0;
  beforeEach(() => {
    now = Date.now();
  });
  test('a write is tried again within its first attempts, however long they took', () => {
    expect(mayRetryContention(COMMIT_ATTEMPTS - 1, now - 10 * CONTENTION_BUDGET_MS)).toBe(true);
  });
  test('past its first attempts, a write is tried again while the budget since its first attempt lasts', () => {
    expect(mayRetryContention(COMMIT_ATTEMPTS, now)).toBe(true);
    expect(mayRetryContention(COMMIT_ATTEMPTS + 5, now - CONTENTION_BUDGET_MS / 2)).toBe(true);
  });
  test('past its first attempts and the budget, a write gives up', () => {
    expect(mayRetryContention(COMMIT_ATTEMPTS, now - CONTENTION_BUDGET_MS - 1)).toBe(false);
  });
  test('a write never takes more than the most attempts, however young', () => {
    expect(mayRetryContention(MAX_COMMIT_ATTEMPTS, Date.now())).toBe(false);
  });
});

test('any other error is not retried', async () => {
  let calls = 0;
  const err = await retryingConflicts(async () => {
    calls++;
    throw Object.assign(new Error('no'), { name: 'ConditionalCheckFailedException' });
  }).catch((e: unknown) => e as Error);
  expect([(err as Error).name, calls]).toEqual(['ConditionalCheckFailedException', 1]);
});

describe('how long a transaction is rebuilt after contention', () => {
  test('a caller rebuilds after contention while its rebuild budget lasts', () => {
    expect(mayRebuildAfterContention(Date.now() - REBUILD_BUDGET_MS / 2)).toBe(true);
  });
  test('past its rebuild budget, a caller gives up, so a route answers before its 28 s time-out', () => {
    expect(mayRebuildAfterContention(Date.now() - REBUILD_BUDGET_MS - 1)).toBe(false);
  });
});

describe('how long a stale snapshot is rebuilt', () => {
  test('a caller rebuilds a stale snapshot while its stale budget lasts', () => {
    expect(mayRebuildStale(Date.now() - STALE_REBUILD_BUDGET_MS / 2)).toBe(true);
  });
  test('past its stale budget, a caller gives up, however few rounds it took', () => {
    expect(mayRebuildStale(Date.now() - STALE_REBUILD_BUDGET_MS - 1)).toBe(false);
  });
  test('a last stale round that first waits out a whole contended commit still answers before the route\'s time-out', () => {
    // The longest round: a commit contended for its whole budget, then its last backoff (500 ms)
    // and its last attempt, then the failed condition; 3 s more for the reads and the answer.
    const longestRoundMs = CONTENTION_BUDGET_MS + 500 + 3_000;
    expect(STALE_REBUILD_BUDGET_MS + longestRoundMs).toBeLessThan(ROUTE_FUNCTION_TIMEOUT_SECONDS * 1000);
  });
});

test('a job-bound write whose job keeps changing past the stale budget ends as contention (409, or a redelivery), never as the failed condition its caller would read as its own outcome', async () => {
  const job = { id: 'job_01ARZ3NDEKTSV4RRFFQ69G5FAV' } as JobItem;
  const stale = () => Promise.reject(new ConditionFailed(['job']));
  await expect(withJobRetry(job.id, stale, 40, job, Date.now() - STALE_REBUILD_BUDGET_MS - 1)).rejects.toBeInstanceOf(Contention);
});
