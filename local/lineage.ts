/**
 * Lambda's recursive loop detection, emulated for the queue consumers.
 *
 * Deployed, Lambda gives each invocation an X-Ray trace header (`_X_AMZN_TRACE_ID`) whose
 * `Lineage` field counts how often each function has been invoked by one chain of events; the AWS
 * SDK puts that header on every request the invocation makes (its recursion-detection
 * middleware), SQS keeps it with each message it sends as the `AWSTraceHeader` system attribute,
 * and the event source mapping reads it back. A function invoked more than 16 times by one chain
 * is stopped and the message goes to the dead-letter queue, unless the function's RecursiveLoop is
 * Allow (https://docs.aws.amazon.com/lambda/latest/dg/invocation-recursion.html; the wiring's
 * `recursiveLoop`).
 *
 * Locally: a consumer invocation's header is made from its records here (`invocationTraceHeader`);
 * every SQS message the invocation sends carries it (local/grants.ts puts it in the call's
 * `MessageSystemAttributes.AWSTraceHeader`, SQS's own way of taking it, which fauxqs-process.mjs
 * keeps and hands back on receive), and the poller stops a record whose chain has already invoked
 * its consumer 16 times (`stoppedByLoopDetection`). Lambda's exact lineage encoding is not
 * published; this one keeps a count per function (`<hash>:<count>`, `|`-separated), which is what
 * the detection needs.
 */
import { createHash, randomBytes } from 'node:crypto';
import type { SQSRecord } from 'aws-lambda';

/** Invocations of one function by one chain that Lambda lets run; the next one is stopped. */
export const RECURSION_LIMIT = 16;

const hashOf = (fn: string) => createHash('sha256').update(fn).digest('hex').slice(0, 8);

function fields(header: string | undefined): Map<string, string> {
  const out = new Map<string, string>();
  for (const kv of (header ?? '').split(';')) {
    const i = kv.indexOf('=');
    if (i > 0) out.set(kv.slice(0, i).trim(), kv.slice(i + 1).trim());
  }
  return out;
}

function lineageOf(header: string | undefined): Map<string, number> {
  const out = new Map<string, number>();
  for (const part of (fields(header).get('Lineage') ?? '').split('|')) {
    const [hash, count] = part.split(':');
    if (hash && Number.isInteger(Number(count))) out.set(hash, Math.max(out.get(hash) ?? 0, Number(count)));
  }
  return out;
}

/** How often function `fn` has been invoked by the chain this trace header belongs to. */
export function invocationsOf(header: string | undefined, fn: string): number {
  return lineageOf(header).get(hashOf(fn)) ?? 0;
}

/** The records of a batch that Lambda would not hand to `fn` (its chain reached the limit). */
export function stoppedByLoopDetection(record: SQSRecord, fn: string): boolean {
  return invocationsOf(record.attributes.AWSTraceHeader, fn) >= RECURSION_LIMIT;
}

/**
 * The trace header of one invocation of `fn` with these records: the first record's trace root (or
 * a new one), and the chains' counts with this invocation added to `fn`'s.
 */
export function invocationTraceHeader(records: readonly SQSRecord[], fn: string): string {
  const counts = new Map<string, number>();
  for (const r of records) for (const [hash, n] of lineageOf(r.attributes.AWSTraceHeader)) counts.set(hash, Math.max(counts.get(hash) ?? 0, n));
  const own = hashOf(fn);
  counts.set(own, (counts.get(own) ?? 0) + 1);
  const root = records.map((r) => fields(r.attributes.AWSTraceHeader).get('Root')).find(Boolean) ?? `1-${Math.floor(Date.now() / 1000).toString(16)}-${randomBytes(12).toString('hex')}`;
  const lineage = [...counts].map(([hash, n]) => `${hash}:${n}`).join('|');
  return `Root=${root};Parent=${randomBytes(8).toString('hex')};Sampled=0;Lineage=${lineage}`;
}

/** Whether an event is a batch of SQS records (a queue consumer's invocation). */
export function sqsRecordsOf(event: unknown): SQSRecord[] | null {
  const records = (event as { Records?: unknown } | null)?.Records;
  if (!Array.isArray(records) || records.length === 0) return null;
  return records.every((r) => (r as { eventSource?: unknown }).eventSource === 'aws:sqs') ? (records as SQSRecord[]) : null;
}
