/**
 * Running Lambda handler modules in-process: loading a manifest module path and building the
 * `Context` object Lambda passes as the second argument.
 */
import { randomUUID } from 'node:crypto';
import { existsSync } from 'node:fs';
import { resolve } from 'node:path';
import type { Context } from 'aws-lambda';
import { secretsRead, type BucketAccess, type KeyAccess } from '../shared/manifest/access';
import { withGrantedSecrets } from '../shared/secrets';
import { withGrants, type Grants } from './grants';
import { invocationTraceHeader, sqsRecordsOf } from './lineage';
import type { RouteDef } from '../shared/manifest/routes';
import { runInvocation, type Invocation } from '../shared/observability/invocation';

/** The project root: manifest module paths (`functions/...ts`) are relative to it. */
export const PROJECT_ROOT = resolve(__dirname, '..');

export const LOCAL_ACCOUNT_ID = '000000000000';

export function localRegion(): string {
  return process.env.AWS_REGION ?? 'us-east-1';
}

export type AnyHandler = (event: any, context: Context) => unknown;

const loaded = new Map<string, Promise<AnyHandler>>();

/** True when the module file of a manifest entry exists (others are still being written). */
export function handlerModuleExists(modulePath: string): boolean {
  if (present.has(modulePath)) return true;
  const found = existsSync(resolve(PROJECT_ROOT, modulePath));
  if (found) present.add(modulePath); // a module, once there, stays (a missing one is asked again)
  return found;
}
const present = new Set<string>();

/**
 * The `handler` export of a manifest module, imported once per module (as a Lambda container keeps
 * its module scope between invocations). Rejects when the module has no `handler` function.
 */
export function loadHandler(modulePath: string): Promise<AnyHandler> {
  let p = loaded.get(modulePath);
  if (!p) {
    p = import(resolve(PROJECT_ROOT, modulePath)).then((mod: { handler?: unknown; default?: { handler?: unknown } }) => {
      const handler = mod.handler ?? mod.default?.handler;
      if (typeof handler !== 'function') throw new Error(`${modulePath} does not export a handler function`);
      return handler as AnyHandler;
    });
    // A failed import is retried on the next call instead of being cached.
    p.catch(() => loaded.delete(modulePath));
    loaded.set(modulePath, p);
  }
  return p;
}

/** A manifest entry's access, as routes, queues and schedules declare it. */
export type EntryAccess = KeyAccess & { table?: 'none' | 'read' | 'write'; bucket?: BucketAccess; sendTo?: readonly string[]; bedrock?: boolean; sms?: boolean };

/**
 * The handler as the function of a manifest entry (named `name`) runs it: each invocation may read
 * only the secrets the entry declares (shared/secrets `withGrantedSecrets`) and make only the
 * AWS calls its access allows (local/grants.ts), as its deployed grants allow.
 * `more`: what the stack grants beside the access (a read route's request count, a consumer's own queue).
 */
export function grantedTo(name: string, access: EntryAccess, handler: AnyHandler, more: Pick<Grants, 'requestCounting' | 'waitSlots' | 'idempotencyRecords' | 'consumes'> = {}): AnyHandler {
  const secrets = secretsRead(access);
  const grants = grantsOf(name, access, more);
  return (event, context) => {
    // A queue consumer's invocation carries the trace header Lambda would give it (local/lineage.ts).
    const records = sqsRecordsOf(event);
    const g = records ? { ...grants, traceHeader: invocationTraceHeader(records, name) } : grants;
    return withGrants(g, () => withGrantedSecrets(secrets, () => handler(event, context)));
  };
}

/**
 * What the stack grants a route beside its access (lib/domain-stack.ts): a read route with a rate
 * limit counts its requests; a long-poll read route holds wait slots; a read route that takes an
 * Idempotency-Key writes its idempotency records.
 */
export function routeGrants(route: Pick<RouteDef, 'access' | 'rateLimit' | 'longPoll' | 'idempotency'>): Pick<Grants, 'requestCounting' | 'waitSlots' | 'idempotencyRecords'> {
  const read = route.access.table === 'read';
  return { requestCounting: read && route.rateLimit !== 'none', waitSlots: read && route.longPoll === true, idempotencyRecords: read && route.idempotency !== 'none' };
}

/** What local/grants.ts holds an entry's invocations to: its access, and `more` (see `grantedTo`). */
export function grantsOf(name: string, access: EntryAccess, more: Pick<Grants, 'requestCounting' | 'waitSlots' | 'idempotencyRecords' | 'consumes'> = {}): Grants {
  return {
    fn: name,
    table: access.table === 'none' ? undefined : access.table,
    bucket: access.bucket,
    sendTo: access.sendTo,
    kms: access.kms,
    transcribe: access.transcribe,
    uploadSigner: access.uploadSigner,
    bedrock: access.bedrock,
    sms: access.sms,
    ...more,
  };
}

/** Forgets loaded modules' handlers (the modules stay in the module cache). */
export function clearHandlerCache(): void {
  loaded.clear();
}

/** A Lambda `Context` for one invocation of `functionName` with the given timeout. */
export function lambdaContext(functionName: string, timeoutSeconds: number, memoryMb = 1024): Context {
  const deadline = Date.now() + timeoutSeconds * 1000;
  const awsRequestId = randomUUID();
  const region = localRegion();
  const logStream = `${new Date().toISOString().slice(0, 10).replace(/-/g, '/')}/[$LATEST]${awsRequestId.replace(/-/g, '')}`;
  return {
    callbackWaitsForEmptyEventLoop: true,
    functionName,
    functionVersion: '$LATEST',
    invokedFunctionArn: `arn:aws:lambda:${region}:${LOCAL_ACCOUNT_ID}:function:${functionName}`,
    memoryLimitInMB: String(memoryMb),
    awsRequestId,
    logGroupName: `/aws/lambda/${functionName}`,
    logStreamName: logStream,
    getRemainingTimeInMillis: () => Math.max(0, deadline - Date.now()),
    done: () => undefined,
    fail: () => undefined,
    succeed: () => undefined,
  };
}

/**
 * One invocation as Lambda runs it: the handler gets `timeoutMs` (its context counts down from it);
 * past that, the invocation has failed, whatever the handler returns later. Lambda would stop the
 * handler there; in-process it cannot be stopped, so its result is ignored and every AWS call it
 * still makes fails (shared/observability/invocation.ts).
 */
export async function invokeWithTimeout(
  handler: AnyHandler,
  event: unknown,
  context: Context,
  timeoutMs: number,
): Promise<{ result: unknown } | { error: unknown } | { error: Error; timedOut: true }> {
  const invocation: Invocation = { fn: context.functionName, stopped: false };
  const running = Promise.resolve().then(() => runInvocation(invocation, () => handler(event, context)));
  let timer: NodeJS.Timeout | undefined;
  const expired = new Promise<'timeout'>((r) => (timer = setTimeout(() => r('timeout'), timeoutMs)));
  try {
    const first = await Promise.race([running.then((result) => ({ result })), expired]);
    if (first === 'timeout') {
      invocation.stopped = true;
      running.catch(() => undefined); // it failed for us already; a later rejection is not unhandled
      return { error: new Error(`Task timed out after ${timeoutMs / 1000} seconds`), timedOut: true };
    }
    return first;
  } catch (error) {
    return { error };
  } finally {
    clearTimeout(timer);
  }
}
