import { Duration, aws_cloudwatch as cloudwatch, aws_dynamodb as dynamodb, type aws_lambda as lambda, type aws_sqs as sqs } from 'aws-cdk-lib';
import type { Construct } from 'constructs';

/**
 * Alarm builders. Every alarm notifies the one topic (lib/monitoring/topic.ts), treats missing
 * data as fine (a quiet system is healthy) and says in its description what it means; what to do
 * is in docs/operations.md under the same name.
 */
const FIVE_MINUTES = Duration.minutes(5);

function alarm(scope: Construct, id: string, action: cloudwatch.IAlarmAction, props: cloudwatch.AlarmProps): cloudwatch.Alarm {
  const a = new cloudwatch.Alarm(scope, id, {
    comparisonOperator: cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
    treatMissingData: cloudwatch.TreatMissingData.NOT_BREACHING,
    ...props,
  });
  a.addAlarmAction(action);
  return a;
}

export function dlqAlarm(scope: Construct, id: string, dlq: sqs.IQueue, action: cloudwatch.IAlarmAction, o: { threshold: number; description: string }): cloudwatch.Alarm {
  return alarm(scope, id, action, {
    alarmDescription: o.description,
    metric: dlq.metricApproximateNumberOfMessagesVisible({ period: Duration.minutes(1), statistic: 'Maximum' }),
    threshold: o.threshold,
    evaluationPeriods: 1,
  });
}

/** Errors (an invocation that threw or timed out) and throttles of one function. */
export function functionAlarms(fn: lambda.Function, action: cloudwatch.IAlarmAction, what: string): void {
  alarm(fn, 'ErrorsAlarm', action, {
    alarmDescription: `${what}: invocations failed (threw, timed out or ran out of memory) in 5 minutes`,
    metric: fn.metricErrors({ period: FIVE_MINUTES, statistic: 'Sum' }),
    threshold: 1,
    evaluationPeriods: 1,
  });
  alarm(fn, 'ThrottlesAlarm', action, {
    alarmDescription: `${what}: invocations throttled (concurrency limit reached) in 5 minutes`,
    metric: fn.metricThrottles({ period: FIVE_MINUTES, statistic: 'Sum' }),
    threshold: 1,
    evaluationPeriods: 1,
  });
}

/** p99 latency of one API method (API Gateway detailed metrics), three 5-minute periods in a row. */
export function methodLatencyAlarm(
  scope: Construct,
  action: cloudwatch.IAlarmAction,
  o: { apiName: string; stage: string; method: string; resourcePath: string; thresholdMs: number; what: string },
): cloudwatch.Alarm {
  return alarm(scope, 'P99LatencyAlarm', action, {
    alarmDescription: `${o.what}: p99 latency at or above ${o.thresholdMs} ms for 15 minutes`,
    metric: new cloudwatch.Metric({
      namespace: 'AWS/ApiGateway',
      metricName: 'Latency',
      dimensionsMap: { ApiName: o.apiName, Stage: o.stage, Method: o.method, Resource: o.resourcePath },
      statistic: 'p99',
      period: FIVE_MINUTES,
    }),
    threshold: o.thresholdMs,
    evaluationPeriods: 3,
  });
}

/** 5XX answers of the whole stage: at least `threshold` in 5 minutes. */
export function api5xxAlarm(scope: Construct, id: string, action: cloudwatch.IAlarmAction, o: { apiName: string; stage: string; threshold: number }): cloudwatch.Alarm {
  return alarm(scope, id, action, {
    alarmDescription: `The API answered at least ${o.threshold} 5XX in 5 minutes`,
    metric: new cloudwatch.Metric({
      namespace: 'AWS/ApiGateway',
      metricName: '5XXError',
      dimensionsMap: { ApiName: o.apiName, Stage: o.stage },
      statistic: 'Sum',
      period: FIVE_MINUTES,
    }),
    threshold: o.threshold,
    evaluationPeriods: 1,
  });
}

/** Read and write throttle events of the table and every GSI (on-demand still throttles past its limits). */
export function tableThrottleAlarm(scope: Construct, id: string, action: cloudwatch.IAlarmAction, table: dynamodb.Table, gsis: readonly string[]): cloudwatch.Alarm {
  const metrics: Record<string, cloudwatch.IMetric> = {};
  let i = 0;
  for (const name of ['ReadThrottleEvents', 'WriteThrottleEvents']) {
    metrics[`t${i++}`] = table.metric(name, { period: FIVE_MINUTES, statistic: 'Sum' });
    for (const gsi of gsis) {
      metrics[`t${i++}`] = table.metric(name, { period: FIVE_MINUTES, statistic: 'Sum', dimensionsMap: { TableName: table.tableName, GlobalSecondaryIndexName: gsi } });
    }
  }
  return alarm(scope, id, action, {
    alarmDescription: 'DynamoDB throttled reads or writes of the table or its indexes in 5 minutes',
    // DynamoDB publishes a throttle metric only when it is non-zero: each term is filled with 0, or
    // the sum would be empty (the alarm OK) unless every one of them throttled at once.
    metric: new cloudwatch.MathExpression({ expression: Object.keys(metrics).map((k) => `FILL(${k}, 0)`).join(' + '), usingMetrics: metrics, period: FIVE_MINUTES, label: 'throttle events' }),
    threshold: 1,
    evaluationPeriods: 1,
  });
}
