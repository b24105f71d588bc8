/** Small process-level helpers shared by the emulator launchers. */
import { createServer } from 'node:net';

/** A port the OS considers free right now (for children that need a port number up front). */
export function freePort(host = '127.0.0.1'): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.unref();
    srv.once('error', reject);
    srv.listen(0, host, () => {
      const addr = srv.address();
      const port = typeof addr === 'object' && addr ? addr.port : 0;
      srv.close(() => resolve(port));
    });
  });
}

export interface WaitOptions {
  timeoutMs?: number;
  intervalMs?: number;
  /** Named in the timeout error. */
  what?: string;
}

/** Thrown from a waitUntil callback to stop waiting at once (e.g. the child process died). */
export class GiveUp extends Error {
  override name = 'GiveUp';
}

/**
 * Polls `fn` until it returns a truthy value (which is returned). Errors thrown by `fn` count as
 * "not yet" (GiveUp excepted), except that the last one is reported on timeout.
 */
export async function waitUntil<T>(fn: () => Promise<T | undefined | null | false> | T | undefined | null | false, opts: WaitOptions = {}): Promise<T> {
  const { timeoutMs = 10_000, intervalMs = 100, what = 'condition' } = opts;
  const deadline = Date.now() + timeoutMs;
  let lastError: unknown;
  for (;;) {
    try {
      const v = await fn();
      if (v) return v;
    } catch (err) {
      if (err instanceof GiveUp) throw err;
      lastError = err;
    }
    if (Date.now() >= deadline) {
      const why = lastError instanceof Error ? `: ${lastError.message}` : '';
      throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}${why}`);
    }
    await new Promise((r) => setTimeout(r, intervalMs));
  }
}
