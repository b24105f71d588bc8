/**
 * One structured logger per process (Powertools), JSON lines, with the keys of the invocation it
 * runs in: the Lambda context (function name, memory, ARN, cold start, AWS request id) and what the
 * handler appends (the API request id, the route, an SQS message id).
 *
 * Those keys live in an AsyncLocalStorage scope per invocation (`withLogScope`), never in the
 * logger object: the local runtime runs many handlers at once in one process, and a key appended
 * by one request must not show up on another's lines (issue 11.7). `logger.appendKeys` inside a
 * scope adds to that scope only; outside any scope (module initialisation, scripts) it behaves as
 * Powertools' own.
 */
import { AsyncLocalStorage } from 'node:async_hooks';
import { Logger } from '@aws-lambda-powertools/logger';
import type { Context } from 'aws-lambda';
import { withDeadline } from './invocation-deadline';

type Attributes = Record<string, unknown>;
type Message = Parameters<Logger['info']>[0];
type Extra = Parameters<Logger['info']>[1][];

const scopes = new AsyncLocalStorage<Attributes>();

class ScopedLogger extends Logger {
  private scoped(extra: Extra): Extra {
    const s = scopes.getStore();
    return (s ? [{ ...s }, ...extra] : extra) as Extra;
  }

  override appendKeys(attributes: Attributes): void {
    const s = scopes.getStore();
    if (s) Object.assign(s, attributes);
    else super.appendKeys(attributes as Parameters<Logger['appendKeys']>[0]);
  }

  override debug(input: Message, ...extra: Extra): void {
    super.debug(input, ...(this.scoped(extra) as never[]));
  }
  override info(input: Message, ...extra: Extra): void {
    super.info(input, ...(this.scoped(extra) as never[]));
  }
  override warn(input: Message, ...extra: Extra): void {
    super.warn(input, ...(this.scoped(extra) as never[]));
  }
  override error(input: Message, ...extra: Extra): void {
    super.error(input, ...(this.scoped(extra) as never[]));
  }
  override critical(input: Message, ...extra: Extra): void {
    super.critical(input, ...(this.scoped(extra) as never[]));
  }
}

export const logger = new ScopedLogger({
  serviceName: 'media-marketplace',
  logLevel: (process.env.LOG_LEVEL as 'INFO' | 'DEBUG' | 'WARN' | 'ERROR' | 'SILENT' | undefined) ??
    (process.env.NODE_ENV === 'test' ? 'SILENT' : 'INFO'),
});

let coldStart = true;

/** The Lambda context as log keys (Powertools' names). */
function contextKeys(context: Partial<Context> | undefined): Attributes {
  if (!context) return {};
  const keys: Attributes = {
    function_name: context.functionName,
    function_memory_size: context.memoryLimitInMB === undefined ? undefined : Number(context.memoryLimitInMB),
    function_arn: context.invokedFunctionArn,
    function_request_id: context.awsRequestId,
    cold_start: coldStart,
  };
  coldStart = false;
  return Object.fromEntries(Object.entries(keys).filter(([, v]) => v !== undefined));
}

/** Run `fn` in a fresh log scope holding the Lambda context's keys (and `extra`). */
export function withLogScope<T>(context: Partial<Context> | undefined, fn: () => T, extra: Attributes = {}): T {
  return scopes.run({ ...contextKeys(context), ...extra }, fn);
}

/** Run `fn` in a child scope: the current keys plus `extra` (e.g. one SQS record of a batch). */
export function withChildLogScope<T>(extra: Attributes, fn: () => T): T {
  return scopes.run({ ...(scopes.getStore() ?? {}), ...extra }, fn);
}

/**
 * A handler whose every invocation runs in its own log scope, and with its deadline
 * (shared/invocation-deadline.ts: the retry loops stop short of Lambda's time-out).
 */
export function withInvocationScope<E, R>(handler: (event: E, context: Context) => Promise<R>): (event: E, context?: Context) => Promise<R> {
  return (event, context) => withLogScope(context, () => withDeadline(context?.getRemainingTimeInMillis?.(), () => handler(event, context as Context)));
}

/** The keys of the current log scope (read-only copy; benchmarks attribute work to invocations by them). */
export function currentLogScope(): Readonly<Attributes> {
  return { ...(scopes.getStore() ?? {}) };
}
