/**
 * When the current invocation ends: Lambda stops a function at its time-out, wherever it is, and
 * for a queue consumer that hands the whole batch back, its finished records included. Loops that
 * wait and try again (the contended writes of shared/db/conflicts.ts) stop short of it instead, so
 * a route answers, and a consumer hands back only the record that could not finish.
 */
import { AsyncLocalStorage } from 'node:async_hooks';

const deadlines = new AsyncLocalStorage<number>();

/**
 * Runs one invocation with `remainingMs` of its time left (Lambda's `getRemainingTimeInMillis()`
 * at its start; undefined, as outside Lambda: no deadline).
 */
export function withDeadline<T>(remainingMs: number | undefined, fn: () => T): T {
  if (remainingMs === undefined || !Number.isFinite(remainingMs)) return fn();
  return deadlines.run(Date.now() + remainingMs, fn);
}

/** Milliseconds left to the current invocation; Infinity outside one. */
export function timeLeftMs(): number {
  const at = deadlines.getStore();
  return at === undefined ? Number.POSITIVE_INFINITY : at - Date.now();
}
