/**
 * Received SQS messages as Lambda hands them to a consumer: the record of the SQSEvent (and its
 * message attributes back in the shape SQS takes on a send), the records a partial batch response
 * lets the poller delete, and the reshaped deliveries of the poller's opt-in modes (the copy an
 * earlier receiver holds, a shuffled batch).
 */
import type { Message, MessageAttributeValue } from '@aws-sdk/client-sqs';
import type { SQSBatchResponse, SQSMessageAttributes, SQSRecord } from 'aws-lambda';

/** One received SQS message as the record of the SQSEvent Lambda passes to a consumer. */
export function toSqsRecord(m: Message, queueArn: string, region: string): SQSRecord {
  const a = m.Attributes ?? {};
  const now = String(Date.now());
  const messageAttributes: SQSMessageAttributes = {};
  for (const [name, v] of Object.entries(m.MessageAttributes ?? {})) {
    messageAttributes[name] = {
      stringValue: v.StringValue,
      binaryValue: v.BinaryValue ? Buffer.from(v.BinaryValue).toString('base64') : undefined,
      stringListValues: v.StringListValues ?? [],
      binaryListValues: (v.BinaryListValues ?? []).map((b) => Buffer.from(b).toString('base64')),
      dataType: v.DataType ?? 'String',
    };
  }
  return {
    messageId: m.MessageId!,
    receiptHandle: m.ReceiptHandle!,
    body: m.Body ?? '',
    attributes: {
      ApproximateReceiveCount: a.ApproximateReceiveCount ?? '1',
      SentTimestamp: a.SentTimestamp ?? now,
      SenderId: a.SenderId ?? 'AIDAIENQZJOLO23YVJ4VO',
      ApproximateFirstReceiveTimestamp: a.ApproximateFirstReceiveTimestamp ?? now,
      ...(a.AWSTraceHeader ? { AWSTraceHeader: a.AWSTraceHeader } : {}),
    },
    messageAttributes,
    md5OfBody: m.MD5OfBody ?? '',
    eventSource: 'aws:sqs',
    eventSourceARN: queueArn,
    awsRegion: region,
  };
}

/**
 * The records to delete after an invocation, by Lambda's partial-batch rules: a thrown error fails
 * the whole batch; an empty or null response (or `batchItemFailures`) is a complete success; an
 * empty, null or unknown `itemIdentifier` fails the whole batch; otherwise only the listed fail.
 */
export function successfulRecords(records: SQSRecord[], outcome: { error: unknown } | { result: unknown }): SQSRecord[] {
  if ('error' in outcome) return [];
  const result = outcome.result as Partial<SQSBatchResponse> | null | undefined;
  if (result === null || typeof result !== 'object' || result.batchItemFailures == null) return records;
  if (!Array.isArray(result.batchItemFailures)) return [];
  const ids = new Set(records.map((r) => r.messageId));
  const failed = new Set<string>();
  for (const f of result.batchItemFailures) {
    if (!f || typeof f.itemIdentifier !== 'string' || !ids.has(f.itemIdentifier)) return [];
    failed.add(f.itemIdentifier);
  }
  return records.filter((r) => !failed.has(r.messageId));
}

/** A record's message attributes as SQS takes them on a send (the inverse of toSqsRecord's). */
export function sdkAttributes(a: SQSMessageAttributes): Record<string, MessageAttributeValue> {
  return Object.fromEntries(
    Object.entries(a).map(([name, v]) => [
      name,
      {
        DataType: v.dataType,
        ...(v.stringValue !== undefined ? { StringValue: v.stringValue } : {}),
        ...(v.binaryValue !== undefined ? { BinaryValue: Buffer.from(v.binaryValue, 'base64') } : {}),
      },
    ]),
  );
}

/** The same message as an earlier receiver holds it: one receive fewer, another receipt handle. */
export function asEarlierReceive(r: SQSRecord): SQSRecord {
  const count = Math.max(1, Number(r.attributes.ApproximateReceiveCount) - 1);
  return { ...r, receiptHandle: `${r.receiptHandle}.earlier`, attributes: { ...r.attributes, ApproximateReceiveCount: String(count) } };
}

/** How a poller with `outOfOrderDeliveries` reorders (all optional). */
export interface OutOfOrderOptions {
  /** The random source (default Math.random); `seededRandom(n)` (./seeded-random) makes a run repeat. */
  random?: () => number;
  /** The chance that a message on its first receive is held back (default 0.3). */
  holdBackProbability?: number;
  /** A held-back message is visible again after 0..this many whole seconds (default 2). */
  maxHoldBackSeconds?: number;
}

/** Fisher–Yates, with the given random source; returns a new array. */
export function shuffled<T>(items: readonly T[], random: () => number): T[] {
  const out = [...items];
  for (let i = out.length - 1; i > 0; i--) {
    const j = Math.floor(random() * (i + 1));
    [out[i], out[j]] = [out[j]!, out[i]!];
  }
  return out;
}
