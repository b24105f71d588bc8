/**
 * The local runtime's stop stack: each part it starts pushes its stop as soon as it runs, and
 * stopping runs them in reverse order of start, one at a time, a failed one logged and passed over.
 */
import type { Log } from './log';

export type Stop = () => Promise<unknown> | void;

/** Runs (and empties) `stops` last first: the runtime's stop(), and its clean-up when a start fails. */
export async function stopInReverse(stops: Stop[], log: Log): Promise<void> {
  // In reverse order of start: HTTP first, DynamoDB Local last.
  for (let stop = stops.pop(); stop; stop = stops.pop()) {
    try {
      await stop();
    } catch (err) {
      log.error('stop failed', err);
    }
  }
}
