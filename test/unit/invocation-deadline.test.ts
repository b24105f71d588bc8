/**
 * The retry loops stop short of the invocation's time-out (shared/invocation-deadline.ts): Lambda
 * would stop the invocation wherever it was (a route's 504; a consumer's whole batch handed back),
 * so a loop gives up as at its own budget's end while there is still time to answer.
 */
import type { Context } from 'aws-lambda';
import { ATTEMPT_RESERVE_MS, mayRebuildAfterContention, mayRebuildStale, mayRetryContention, retryingConflicts, ROUND_RESERVE_MS } from '../../shared/db/conflicts';
import { timeLeftMs, withDeadline } from '../../shared/invocation-deadline';
import { withInvocationScope } from '../../shared/logger';

const conflict = () => Object.assign(new Error('Transaction is ongoing for the item'), { name: 'TransactionConflictException' });

test('outside an invocation nothing bounds the loops but their own budgets', () => {
  expect(timeLeftMs()).toBe(Number.POSITIVE_INFINITY);
  expect([mayRetryContention(1, Date.now()), mayRebuildAfterContention(Date.now()), mayRebuildStale(Date.now())]).toEqual([true, true, true]);
});

test('with time enough left, the loops follow their own budgets', () => {
  withDeadline(60_000, () => {
    expect([mayRetryContention(1, Date.now()), mayRebuildAfterContention(Date.now()), mayRebuildStale(Date.now())]).toEqual([true, true, true]);
    expect(mayRebuildAfterContention(Date.now() - 11_000)).toBe(false); // its own budget still ends it
  });
});

test('a rebuild (a fresh read and a commit) is not started with less than a round left', () => {
  withDeadline(ROUND_RESERVE_MS - 10, () => {
    expect(mayRebuildAfterContention(Date.now())).toBe(false);
    expect(mayRebuildStale(Date.now())).toBe(false);
    expect(mayRetryContention(1, Date.now())).toBe(true); // one attempt still fits
  });
});

test('a contended write is not tried again with less than an attempt left, even among its first attempts', () => {
  withDeadline(ATTEMPT_RESERVE_MS - 10, () => expect(mayRetryContention(1, Date.now())).toBe(false));
});

test('a plain write meeting a transaction gives up with Contention before the invocation ends, not at its time-out', async () => {
  const started = Date.now();
  let attempts = 0;
  const given = withDeadline(ATTEMPT_RESERVE_MS + 400, () =>
    retryingConflicts(async () => {
      attempts++;
      throw conflict();
    }),
  );
  await expect(given).rejects.toMatchObject({ name: 'Contention' });
  expect(attempts).toBeGreaterThan(1); // it did try again while there was time
  expect(Date.now() - started).toBeLessThan(ATTEMPT_RESERVE_MS + 400);
});

test('every handler runs with its Lambda context\'s remaining time as its deadline', async () => {
  const handler = withInvocationScope(async () => timeLeftMs());
  const left = await handler({}, { getRemainingTimeInMillis: () => 2_500 } as unknown as Context);
  expect(left).toBeLessThanOrEqual(2_500);
  expect(left).toBeGreaterThan(2_000);
});
