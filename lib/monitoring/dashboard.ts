import { Duration, aws_cloudwatch as cw, type aws_sqs as sqs } from 'aws-cdk-lib';
import type { Construct } from 'constructs';
import { METRIC, METRICS_NAMESPACE, METRICS_SERVICE } from '../../shared/observability/metrics';
import type { Plumbing } from '../plumbing';

const PERIOD = Duration.minutes(5);

const business = (metricName: string, dims: Record<string, string>, label: string, statistic = 'Sum'): cw.Metric =>
  new cw.Metric({ namespace: METRICS_NAMESPACE, metricName, dimensionsMap: { service: METRICS_SERVICE, ...dims }, statistic, period: PERIOD, label });

/** Every value of one dimension of a business metric, found at display time (SEARCH). */
const searchByType = (metricName: string, label: string): cw.MathExpression =>
  new cw.MathExpression({
    expression: `SEARCH('{${METRICS_NAMESPACE},service,type} MetricName="${metricName}"', 'Sum', 300)`,
    usingMetrics: {},
    label,
    period: PERIOD,
  });

/**
 * The pipeline at a glance: uploads in, verdicts out, queue depths, webhook success, money moved.
 * Business figures are the EMF metrics of shared/observability/metrics.ts.
 */
export function pipelineDashboard(
  scope: Construct,
  id: string,
  o: { plumbing: Plumbing; apiName: string; stage: string; /** Dead-letter queues outside Plumbing (the schedules'), by label. */ moreDeadLetterQueues?: ReadonlyMap<string, sqs.IQueue> },
): cw.Dashboard {
  const d = new cw.Dashboard(scope, id, { defaultInterval: Duration.hours(24) });
  const uploadRule = o.plumbing.rules.get('upload-created');
  const uploads = uploadRule
    ? [new cw.Metric({ namespace: 'AWS/Events', metricName: 'MatchedEvents', dimensionsMap: { RuleName: uploadRule.ruleName }, statistic: 'Sum', period: PERIOD, label: 'uploads landed' })]
    : [];
  const approved = business(METRIC.events, { type: 'submission.approved' }, 'approved');
  const rejected = business(METRIC.events, { type: 'submission.rejected' }, 'rejected');
  const delivered = business(METRIC.webhookAttempts, { outcome: 'delivered' }, 'delivered');
  const failed = business(METRIC.webhookAttempts, { outcome: 'failed_attempt' }, 'failed attempts');

  d.addWidgets(
    new cw.GraphWidget({ title: 'Uploads and verdicts (per 5 min)', left: [...uploads, approved, rejected], width: 12 }),
    new cw.GraphWidget({
      title: 'Approval rate (%)',
      left: [new cw.MathExpression({ expression: '100 * a / (a + r)', usingMetrics: { a: approved, r: rejected }, label: 'approved / verdicts', period: PERIOD })],
      leftYAxis: { min: 0, max: 100 },
      width: 12,
    }),
  );
  d.addWidgets(
    new cw.GraphWidget({
      title: 'Queue depth (visible messages)',
      left: [...o.plumbing.queues].map(([name, q]) => q.metricApproximateNumberOfMessagesVisible({ period: Duration.minutes(1), statistic: 'Maximum', label: name })),
      width: 12,
    }),
    new cw.GraphWidget({
      title: 'Dead-letter queues (messages)',
      left: [...o.plumbing.allDeadLetterQueues, ...(o.moreDeadLetterQueues ?? [])].map(([name, q]) => q.metricApproximateNumberOfMessagesVisible({ period: Duration.minutes(1), statistic: 'Maximum', label: name })),
      width: 12,
    }),
  );
  d.addWidgets(
    new cw.GraphWidget({
      title: 'Webhook success rate (% of attempts)',
      left: [new cw.MathExpression({ expression: '100 * ok / (ok + ko)', usingMetrics: { ok: delivered, ko: failed }, label: 'delivered', period: PERIOD })],
      right: [delivered, failed],
      leftYAxis: { min: 0, max: 100 },
      width: 12,
    }),
    new cw.GraphWidget({ title: 'Events written (by type)', left: [searchByType(METRIC.events, 'events')], width: 12 }),
  );
  d.addWidgets(
    new cw.GraphWidget({ title: 'Ledger movements (rows by type)', left: [searchByType(METRIC.ledgerMovements, 'rows')], width: 12 }),
    new cw.GraphWidget({ title: 'Ledger movements (cents by type)', left: [searchByType(METRIC.ledgerCents, 'cents')], width: 12 }),
  );
  d.addWidgets(
    new cw.GraphWidget({
      title: 'API: requests, 4XX, 5XX',
      left: ['Count', '4XXError', '5XXError'].map(
        (m) => new cw.Metric({ namespace: 'AWS/ApiGateway', metricName: m, dimensionsMap: { ApiName: o.apiName, Stage: o.stage }, statistic: 'Sum', period: PERIOD }),
      ),
      width: 12,
    }),
    new cw.GraphWidget({
      title: 'API latency p50 / p99 (ms)',
      left: ['p50', 'p99'].map(
        (s) => new cw.Metric({ namespace: 'AWS/ApiGateway', metricName: 'Latency', dimensionsMap: { ApiName: o.apiName, Stage: o.stage }, statistic: s, period: PERIOD }),
      ),
      width: 12,
    }),
  );
  return d;
}
