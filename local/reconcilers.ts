/**
 * Start-up reconcilers. The SQS emulator keeps messages in memory only; a clean stop saves them and
 * the next start restores them (local/sqs-snapshot.ts), but a killed process writes no snapshot and
 * loses whatever was queued while DynamoDB Local and the S3 directory keep their data. A reconciler
 * re-enqueues work whose state in the table says it is unfinished (local/reconcile-unfinished.ts:
 * unscored uploads, undelivered events, sandbox simulations). They run once per start, only when
 * the previous run did not stop cleanly (its marker file is still there), after the queues exist
 * and before the pollers and stream pipes start; they must be idempotent, as consumers are.
 */
import { existsSync, readFileSync, rmSync } from 'node:fs';
import { writeFileDurably } from './durable-write';
import type { Log } from './log';
import type { QueueSender } from './sqs';

export interface ReconcileContext {
  /** Sends a message body to a wiring queue by name. */
  send: QueueSender;
  /** Routes an event through the local EventBridge rules (as S3 does for a new object). */
  route(event: unknown): Promise<string[]>;
  bucketName: string;
  account: string;
  region: string;
  log: Log;
  /** When the run that was killed started (from its marker), if known. */
  killedRunStartedAt?: string;
}

export interface Reconciler {
  name: string;
  run(ctx: ReconcileContext): Promise<void>;
}

/** Reconcilers run by `startRuntime` (in registration order). */
export const onStart: Reconciler[] = [];

export function registerReconciler(reconciler: Reconciler): void {
  if (!onStart.some((r) => r.name === reconciler.name)) onStart.push(reconciler);
}

/**
 * Whether the previous run stopped cleanly: the runtime holds a marker file while it runs and
 * removes it last in a clean stop, after the queues are saved.
 */
export function runMarker(file: string): { uncleanBefore: boolean; startedAt: string | null; release(): void } {
  const uncleanBefore = existsSync(file);
  // "<pid> <ISO start>" of the run that did not stop cleanly (null when unreadable).
  const startedAt = uncleanBefore ? (/^\S+ (\S+)/.exec(readFileSync(file, 'utf8'))?.[1] ?? null) : null;
  // After an unclean stop the marker keeps that run's start: if this run's reconcilers fail too,
  // the next start still looks back from the run whose work was cut short.
  const keep = startedAt && !Number.isNaN(Date.parse(startedAt)) ? startedAt : new Date().toISOString();
  writeFileDurably(file, `${process.pid} ${keep}\n`);
  return { uncleanBefore, startedAt: startedAt && !Number.isNaN(Date.parse(startedAt)) ? startedAt : null, release: () => rmSync(file, { force: true }) };
}

/** Runs each reconciler; false when any failed (its work is then still to do: see runtime.ts). */
export async function runReconcilers(ctx: ReconcileContext, reconcilers: readonly Reconciler[] = onStart): Promise<boolean> {
  let ok = true;
  for (const r of reconcilers) {
    try {
      await r.run(ctx);
      ctx.log.info(`reconciler ${r.name}: done`);
    } catch (err) {
      ok = false;
      ctx.log.error(`reconciler ${r.name}: failed; it runs again at the next start`, err);
    }
  }
  return ok;
}
