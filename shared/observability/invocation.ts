/**
 * Local runtime: an invocation that Lambda would have stopped makes no more AWS calls.
 *
 * Deployed, Lambda ends a function at its time-out: nothing it would still have done happens. In
 * the local runtime every handler shares one process and cannot be stopped, so a timed-out handler
 * would go on writing to the table, the bucket and the queues, and a test could pass on work that
 * never happens deployed. Each local invocation therefore runs inside `runInvocation`; when the
 * runtime gives up on it (its time-out) it sets `stopped`, and from then on every AWS SDK call of
 * that invocation fails before it is sent (`traced()` puts `checkCall` before every call of every
 * client), and so do its webhook POSTs and Stripe requests (`ensureRunning`). Outside an invocation (tests, scripts, the runtime itself) nothing is checked. The
 * local runtime also hooks its grant check in here (local/grants.ts), its emulation of
 * DynamoDB's transaction conflicts (local/dynamodb-conflicts.ts) and of index lag
 * (local/index-lag.ts), so that no deployed bundle carries any of them.
 */
import { AsyncLocalStorage } from 'node:async_hooks';

export class InvocationStopped extends Error {
  constructor(fn: string) {
    super(`${fn}: this invocation timed out and was stopped; Lambda would not have made this call`);
    this.name = 'InvocationStopped';
  }
}

export interface Invocation {
  readonly fn: string;
  stopped: boolean;
}

const store = new AsyncLocalStorage<Invocation>();

/** Runs `fn` as one invocation of function `name`; stop it with `invocation.stopped = true`. */
export function runInvocation<T>(invocation: Invocation, fn: () => T): T {
  return store.run(invocation, fn);
}

type CallCheck = (client: string, command: string, input: unknown) => void;
let localCheck: CallCheck | null = null;

/** Local runtime: the check of every SDK call against the invocation's grants (local/grants.ts). */
export function setLocalCallCheck(check: CallCheck | null): void {
  localCheck = check;
}

type AnswerCheck = (client: string, command: string, input: unknown, err: unknown) => unknown;
let localAnswer: AnswerCheck | null = null;

/** Local runtime: what the deployed role would get instead of an emulator's error (local/grants.ts). */
export function setLocalAnswerCheck(check: AnswerCheck | null): void {
  localAnswer = check;
}

type Answer = { output?: unknown };
type CallWrap = (client: string, command: string, input: unknown, send: (input: unknown) => Promise<Answer>) => Promise<Answer>;
let localCall: CallWrap | null = null;

/**
 * Local runtime: wraps every SDK call once, outside the SDK's retries, where DynamoDB would answer
 * less than an emulator does (local/index-lag.ts: an index that has not yet taken in the latest
 * writes). The wrap may send a different input and hand back a different output.
 */
export function setLocalCallWrap(wrap: CallWrap | null): void {
  localCall = wrap;
}

/** An SDK call (`traced()`): `send` as it is deployed, through the local runtime's wrap when one is set. */
export function callAsDeployed<R extends Answer>(client: string, command: string, input: unknown, send: (input: unknown) => Promise<R>): Promise<R> {
  return localCall ? (localCall(client, command, input, send) as Promise<R>) : send(input);
}

type AttemptWrap = <T>(client: string, command: string, input: unknown, send: () => Promise<T>) => Promise<T>;
let localAttempt: AttemptWrap | null = null;

/** Local runtime: wraps each attempt of every SDK call, from its sending to its answer (local/dynamodb-conflicts.ts). */
export function setLocalAttemptWrap(wrap: AttemptWrap | null): void {
  localAttempt = wrap;
}

/**
 * Each attempt of an SDK call, inside the SDK's retry loop (`traced()`): throws when the current
 * invocation was stopped; then `send`, through the local runtime's wrap when one is set (it may
 * answer in DynamoDB's place). Deployed, never set: `send()` as it is.
 */
export function attempt<T>(client: string, command: string, input: unknown, send: () => Promise<T>): Promise<T> {
  ensureRunning();
  return localAttempt ? localAttempt(client, command, input, send) : send();
}

/**
 * After an AWS call failed (`traced()`): the error the deployed function would get. Locally an
 * emulator may answer more than the function's role would learn (S3 tells a missing object with
 * 404 only to a caller that may list the bucket, and 403 to any other); deployed, never set: the
 * error as it came.
 */
export function answerAsDeployed(client: string, command: string, input: unknown, err: unknown): unknown {
  return localAnswer ? localAnswer(client, command, input, err) : err;
}

/**
 * Before every AWS SDK call (`traced()`): throws when the current invocation was stopped, or when
 * the local runtime's grants refuse the call. Deployed, neither is ever set: nothing is checked.
 */
export function checkCall(client: string, command: string, input: unknown): void {
  ensureRunning();
  localCheck?.(client, command, input);
}

/**
 * Before a call that leaves the process other than through an AWS SDK client (a webhook POST, a
 * Stripe request): throws when the current invocation was stopped. Deployed: never set.
 */
export function ensureRunning(): void {
  const current = store.getStore();
  if (current?.stopped) throw new InvocationStopped(current.fn);
}
