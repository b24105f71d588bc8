/**
 * Start-up reconcilers. The SQS emulator keeps messages in memory only; a clean stop saves them and
 * the next start restores them (local/sqs-snapshot.ts), but a killed process writes no snapshot and
 * loses whatever was queued while DynamoDB Local and the S3 directory keep their data. Domain code
 * registers a reconciler here to re-enqueue work whose state in the table says it is unfinished
 * (e.g. a submission still `pending_score` with no scoring message in flight). Reconcilers run once
 * per start, after the queues exist and the pollers run; they must be idempotent, as consumers are.
 */
import type { Log } from './log';
import type { QueueSender } from './sqs';

export interface ReconcileContext {
  /** Sends a message body to a wiring queue by name. */
  send: QueueSender;
  log: Log;
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

export async function runReconcilers(ctx: ReconcileContext, reconcilers: readonly Reconciler[] = onStart): Promise<void> {
  for (const r of reconcilers) {
    try {
      await r.run(ctx);
      ctx.log.info(`reconciler ${r.name}: done`);
    } catch (err) {
      ctx.log.error(`reconciler ${r.name}: failed`, err);
    }
  }
}
