/**
 * The time a request may take, for the stack (lib/api.ts, lib/domain-stack.ts) and the local HTTP
 * front (local/http-limits.ts) alike, so the local runtime never allows more than the deployed API.
 */

/** API Gateway's default (and, without a quota increase, maximum) integration time-out. */
export const DEFAULT_INTEGRATION_TIMEOUT_SECONDS = 29;

/**
 * Every route's function but the long polls: below the integration time-out, so a stuck handler
 * ends in its own log; API Gateway then answers 502 (the function failed), not 504.
 */
export const ROUTE_FUNCTION_TIMEOUT_SECONDS = 28;

/**
 * The webhooks consumer's time-out. With the routes' it bounds how long a writer of webhook
 * attempt messages (the consumer, the replay route) can still commit the state a message it sent
 * waits for (shared/webhooks/delivery.ts).
 */
export const WEBHOOKS_CONSUMER_TIMEOUT_SECONDS = 30;

/**
 * The long-poll budget (D20, 1..60 s) turned into the function's and the integration's time-outs.
 * As for every route, the function stops before the integration gives up, so a stuck wait ends in
 * its own log with API Gateway's 502, never a 504 while the function runs on: the function has the
 * wait plus 3 s (its last reads and the key's check), at least the routes' 28 s; the integration
 * one second more, at least API Gateway's default 29 s (25 s: 28 and 29; 60 s: 63 and 64).
 */
export function longPollTimeoutSeconds(longPollSeconds: number): { integration: number; fn: number } {
  if (!Number.isInteger(longPollSeconds) || longPollSeconds < 1 || longPollSeconds > 60) {
    throw new Error(`longPollSeconds must be an integer 1..60, got ${longPollSeconds}`);
  }
  const fn = Math.max(ROUTE_FUNCTION_TIMEOUT_SECONDS, longPollSeconds + 3);
  return { integration: Math.max(DEFAULT_INTEGRATION_TIMEOUT_SECONDS, fn + 1), fn };
}
