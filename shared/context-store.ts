/**
 * The one way this code makes an AsyncLocalStorage (the invocation, log scope, secret grants,
 * object budget and local grants stores).
 *
 * Node keeps every store that has been used in one process-wide list, and every new promise walks
 * that list. A Lambda instance loads these modules once, so it has five. A test runner that loads
 * the modules afresh for each test file, as Jest does, adds five more per file, and promise-heavy
 * code slows down as the run goes on: a delivery test took 23 s alone and 48–104 s as the
 * sixty-third file of a run. The runner calls `disableContextStores` when a file is done
 * (test/support/environment.cjs), so the list stays this size.
 */
import { AsyncLocalStorage } from 'node:async_hooks';

const stores: AsyncLocalStorage<unknown>[] = [];

export function contextStore<T>(): AsyncLocalStorage<T> {
  const store = new AsyncLocalStorage<T>();
  stores.push(store as AsyncLocalStorage<unknown>);
  return store;
}

/** Takes every store made through this module instance out of Node's list. */
export function disableContextStores(): void {
  for (const store of stores) store.disable();
}
