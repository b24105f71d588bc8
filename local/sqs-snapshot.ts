/**
 * Queue contents survive a restart of `npm start`.
 *
 * The SQS emulator (fauxqs) keeps messages in memory only. When the runtime stops, after the
 * pollers have finished their batches, every message of every queue and dead-letter queue (ready,
 * delayed and in flight) is read through fauxqs' non-destructive inspection endpoint and written
 * to `DATA_DIR/sqs-snapshot.json`. The next start re-sends them before the pollers run, each with
 * the delay it still had (a delayed message keeps its due time; an in-flight one comes back when its
 * visibility timeout would have ended), so pending webhook retries, sandbox ticks and scoring work
 * go on where they stopped. The snapshot is deleted once restored.
 *
 * A restored message is the same SQS message as before: it keeps its message id, its sent time,
 * its trace header and its receive count (the emulator's local-only endpoint sets them on the re-sent message, see
 * local/fauxqs-process.mjs), so a message that keeps failing reaches its dead-letter queue after
 * the queue's maxReceiveCount receives in all, however often `npm start` restarts in between, as in
 * SQS. A restored delay is at most 900 s, as SQS allows (the webhook dispatcher keeps longer due
 * times in the message and re-queues, so nothing is delivered early). A killed process (SIGKILL,
 * power loss) writes no snapshot: only a clean stop (Ctrl-C, SIGTERM) does.
 */
import { existsSync, readFileSync, rmSync } from 'node:fs';
import { writeFileDurably } from './durable-write';
import { SendMessageBatchCommand, type MessageAttributeValue, type SQSClient } from '@aws-sdk/client-sqs';

const MAX_DELAY_SECONDS = 900;

export interface SnapshotMessage {
  body: string;
  messageAttributes: Record<string, MessageAttributeValue>;
  /** Epoch ms at which the message becomes receivable again. */
  availableAt: number;
  /** SQS's identity and history of the message (absent in snapshots of earlier versions). */
  messageId?: string;
  sentTimestamp?: number;
  receiveCount?: number;
  firstReceiveTimestamp?: number;
  /** Its AWSTraceHeader (the chain Lambda's recursive loop detection counts: local/lineage.ts). */
  traceHeader?: string;
}

export interface QueueSnapshot {
  version: 1;
  takenAt: string;
  queues: Record<string, SnapshotMessage[]>;
}

interface InspectedMessage {
  messageId?: string;
  sentTimestamp?: number;
  approximateReceiveCount?: number;
  approximateFirstReceiveTimestamp?: number;
  awsTraceHeader?: string;
  body: string;
  messageAttributes?: Record<string, { DataType: string; StringValue?: string; BinaryValue?: string; StringListValues?: string[] }>;
  delayUntil?: number;
}
interface Inspection {
  name: string;
  messages: {
    ready: InspectedMessage[];
    delayed: InspectedMessage[];
    inflight: { message: InspectedMessage; visibilityDeadline: number }[];
  };
}

function attributes(m: InspectedMessage): Record<string, MessageAttributeValue> {
  const out: Record<string, MessageAttributeValue> = {};
  for (const [name, v] of Object.entries(m.messageAttributes ?? {})) {
    out[name] = {
      DataType: v.DataType,
      ...(v.StringValue !== undefined ? { StringValue: v.StringValue } : {}),
      ...(v.BinaryValue !== undefined ? { BinaryValue: Buffer.from(v.BinaryValue, 'base64') } : {}),
      ...(v.StringListValues?.length ? { StringListValues: v.StringListValues } : {}),
    };
  }
  return out;
}

function saved(m: InspectedMessage, availableAt: number): SnapshotMessage {
  return {
    body: m.body,
    messageAttributes: attributes(m),
    availableAt,
    ...(m.messageId ? { messageId: m.messageId } : {}),
    ...(m.sentTimestamp ? { sentTimestamp: m.sentTimestamp } : {}),
    ...(m.approximateReceiveCount !== undefined ? { receiveCount: m.approximateReceiveCount } : {}),
    ...(m.approximateFirstReceiveTimestamp ? { firstReceiveTimestamp: m.approximateFirstReceiveTimestamp } : {}),
    ...(m.awsTraceHeader ? { traceHeader: m.awsTraceHeader } : {}),
  };
}

/** Reads every message of the named queues from a running fauxqs without changing its state. */
export async function takeSnapshot(endpoint: string, queueNames: readonly string[], now = Date.now()): Promise<QueueSnapshot> {
  const queues: Record<string, SnapshotMessage[]> = {};
  for (const name of queueNames) {
    const res = await fetch(`${endpoint}/_fauxqs/queues/${encodeURIComponent(name)}`);
    if (res.status === 404) continue;
    if (!res.ok) throw new Error(`SQS emulator: inspecting ${name} answered ${res.status}`);
    const q = (await res.json()) as Inspection;
    const messages: SnapshotMessage[] = [
      ...q.messages.ready.map((m) => saved(m, now)),
      ...q.messages.delayed.map((m) => saved(m, m.delayUntil ?? now)),
      ...q.messages.inflight.map((f) => saved(f.message, f.visibilityDeadline)),
    ];
    if (messages.length) queues[name] = messages;
  }
  return { version: 1, takenAt: new Date(now).toISOString(), queues };
}

export function countMessages(s: QueueSnapshot): number {
  return Object.values(s.queues).reduce((n, m) => n + m.length, 0);
}

/** Writes the snapshot atomically (a crash mid-write leaves the previous file or none). */
export function writeSnapshot(file: string, snapshot: QueueSnapshot): void {
  writeFileDurably(file, JSON.stringify(snapshot));
}

export function readSnapshot(file: string): QueueSnapshot | null {
  if (!existsSync(file)) return null;
  const s = JSON.parse(readFileSync(file, 'utf8')) as QueueSnapshot;
  if (s.version !== 1) throw new Error(`${file}: unknown snapshot version ${String(s.version)}`);
  return s;
}

/**
 * Re-sends a snapshot's messages with the delay each still had (explicit per message, so a queue's
 * own delivery delay is not added again), then gives each back its id, sent time and receive count
 * through the emulator at `endpoint`. Queues that no longer exist are reported, not dropped
 * silently. Returns the number of messages restored.
 */
export async function restoreSnapshot(
  client: SQSClient,
  endpoint: string,
  urlOf: (queueName: string) => string | undefined,
  snapshot: QueueSnapshot,
  onUnknownQueue: (name: string, count: number) => void,
  now = Date.now(),
): Promise<number> {
  let restored = 0;
  for (const [name, messages] of Object.entries(snapshot.queues)) {
    const url = urlOf(name);
    if (!url) {
      onUnknownQueue(name, messages.length);
      continue;
    }
    for (let i = 0; i < messages.length; i += 10) {
      const batch = messages.slice(i, i + 10);
      const res = await client.send(
        new SendMessageBatchCommand({
          QueueUrl: url,
          Entries: batch.map((m, j) => ({
            Id: String(j),
            MessageBody: m.body,
            DelaySeconds: Math.min(MAX_DELAY_SECONDS, Math.max(0, Math.ceil((m.availableAt - now) / 1000))),
            ...(Object.keys(m.messageAttributes).length ? { MessageAttributes: m.messageAttributes } : {}),
          })),
        }),
      );
      if (res.Failed?.length) throw new Error(`restoring ${name}: ${res.Failed.length} messages refused (${res.Failed[0]!.Message ?? res.Failed[0]!.Code})`);
      await giveBackHistory(endpoint, name, batch, res.Successful ?? []);
      restored += batch.length;
    }
  }
  return restored;
}

/** Sets each re-sent message's id, sent time and receive count to what it had before the stop. */
async function giveBackHistory(endpoint: string, queueName: string, batch: SnapshotMessage[], sent: { Id?: string; MessageId?: string }[]): Promise<void> {
  const messages = sent.map((s) => {
    const m = batch[Number(s.Id)]!;
    return { newMessageId: s.MessageId, messageId: m.messageId, sentTimestamp: m.sentTimestamp, receiveCount: m.receiveCount, firstReceiveTimestamp: m.firstReceiveTimestamp, traceHeader: m.traceHeader };
  });
  const res = await fetch(`${endpoint}/_local/queues/${encodeURIComponent(queueName)}/restored`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ messages }),
  });
  const answer = res.ok ? ((await res.json()) as { updated?: number }) : null;
  if (answer?.updated !== messages.length) {
    throw new Error(`restoring ${queueName}: the SQS emulator took back the history of ${answer?.updated ?? 0} of ${messages.length} messages (HTTP ${res.status})`);
  }
}

export function removeSnapshot(file: string): void {
  rmSync(file, { force: true });
}
