/**
 * Business metrics as CloudWatch Embedded Metric Format (Powertools Metrics): one JSON line per
 * figure on stdout, which CloudWatch turns into metrics without any API call. The pipeline
 * dashboard (lib/monitoring/dashboard.ts) reads exactly these names and dimensions.
 *
 * They are taken where a figure becomes true, once:
 * - `Events` {type}: every event a committed transaction wrote (Tx.commit, shared/db/tx.ts), so
 *   `submission.approved` / `submission.rejected` are the verdicts and approvals, and
 *   `submission.scored` every scoring outcome;
 * - `LedgerMovements` {type} and `LedgerCents` {type}: every committed ledger row, and its amount;
 * - `WebhookAttempts` {outcome: delivered | failed_attempt}: every HTTP attempt to a receiver.
 * Uploads are counted by the S3 → EventBridge rule itself (`MatchedEvents` of upload-created).
 *
 * Emitted deployed only: locally and in tests nothing is written (RUNTIME=local, NODE_ENV=test).
 */
import { MetricUnit, Metrics } from '@aws-lambda-powertools/metrics';

export const METRICS_NAMESPACE = 'MediaMarketplace';
export const METRICS_SERVICE = 'media-marketplace';

export const METRIC = {
  events: 'Events',
  ledgerMovements: 'LedgerMovements',
  ledgerCents: 'LedgerCents',
  webhookAttempts: 'WebhookAttempts',
} as const;

let metrics: Metrics | null = null;

function enabled(): boolean {
  return process.env.RUNTIME !== 'local' && process.env.NODE_ENV !== 'test';
}

function emit(name: string, unit: (typeof MetricUnit)[keyof typeof MetricUnit], value: number, dimensions: Record<string, string>): void {
  if (!enabled()) return;
  metrics ??= new Metrics({ namespace: METRICS_NAMESPACE, serviceName: METRICS_SERVICE });
  // A single metric is written at once: nothing is buffered across concurrent invocations.
  const single = metrics.singleMetric();
  for (const [k, v] of Object.entries(dimensions)) single.addDimension(k, v);
  single.addMetric(name, unit, value);
}

/** Items of a committed transaction: count its events and ledger rows. */
export function recordCommitted(items: readonly { Put?: { Item?: Record<string, unknown> } }[]): void {
  if (!enabled()) return;
  for (const i of items) {
    const item = i.Put?.Item;
    if (!item) continue;
    if (item.entity === 'event' && typeof item.type === 'string') emit(METRIC.events, MetricUnit.Count, 1, { type: item.type });
    if (item.entity === 'credit_transaction' && typeof item.type === 'string') {
      emit(METRIC.ledgerMovements, MetricUnit.Count, 1, { type: item.type });
      emit(METRIC.ledgerCents, MetricUnit.Count, Number(item.amount_cents ?? 0), { type: item.type });
    }
  }
}

/** One HTTP attempt to a webhook receiver. */
export function recordWebhookAttempt(ok: boolean): void {
  emit(METRIC.webhookAttempts, MetricUnit.Count, 1, { outcome: ok ? 'delivered' : 'failed_attempt' });
}
