/**
 * The webhook dispatcher (D37, D38, D48), the consumer of the `webhooks` queue, deployed and local.
 *
 * Two kinds of message arrive:
 * - a DynamoDB stream record of a new event item (pipe `outbox-to-webhooks`): fan out to every
 *   enabled endpoint of the tenant subscribed to the type (delivery.ts `fanOut`);
 * - an `AttemptMessage` (a retry, a replay, or a re-deferral of a long delay).
 *
 * A batch runs its records concurrently, at most MAX_PARALLEL at a time, grouped by endpoint: the
 * attempt messages of one endpoint run one after the other in batch order, different endpoints
 * and fan-outs in parallel. So a slow or hanging receiver (up to 15 s per attempt) delays only its
 * own endpoint's deliveries, never another tenant's. Each failed record is reported on its own
 * (`batchItemFailures`): SQS redelivers it, and after maxReceiveCount parks it in the DLQ.
 *
 * The batch keeps within the consumer's Lambda timeout (30 s, two hanging attempts would pass it):
 * a record is started only while one attempt's time plus a margin is left in the invocation
 * (`context.getRemainingTimeInMillis()`). One that is not is handed back: an attempt message is
 * sent to the queue again unchanged (same token, so it stays the live one) and acknowledged; any
 * other record is reported as a batch item failure. The first record of each group always starts,
 * so every invocation makes progress (a batch has at most MAX_PARALLEL groups: all start at once).
 *
 * Modules: delivery-store.ts (the table), endpoint-health.ts (disabling), delivery.ts (attempts).
 */
import { unmarshall } from '@aws-sdk/util-dynamodb';
import type { AttributeValue } from '@aws-sdk/client-dynamodb';
import type { Context, SQSBatchResponse, SQSEvent, SQSRecord } from 'aws-lambda';
import { logger } from '../logger';
import { ATTEMPT_TIMEOUT_MS, postWebhook } from './sender';
import { sendAttempt, type AttemptMessage } from './queue';
import { fanOut, fanOutToken, onAttemptMessage, type Post } from './delivery';
import { streamRecordOf } from '../manifest/stream-event';

export { aggregateStatus, getEvent, newEntry, type DeliveryEntry, type DeliveryStatus } from './delivery-store';
export { attemptDelivery } from './delivery';

/** Records (groups) of one batch in flight at once. */
export const MAX_PARALLEL = 10;
/**
 * Time kept beyond one attempt's timeout before a record starts: the attempt's writes (next
 * message, outcome, aggregate, log, endpoint health) and the batch response.
 */
export const DEADLINE_MARGIN_MS = 5_000;

interface StreamRecordBody {
  eventID?: string;
  eventName?: string;
  dynamodb?: { NewImage?: Record<string, AttributeValue> };
}

type Parsed = { kind: 'attempt'; msg: AttemptMessage } | { kind: 'fanout'; image: Record<string, unknown>; recordId: string | null } | { kind: 'unknown' };

function parse(record: SQSRecord): Parsed {
  const body = streamRecordOf(JSON.parse(record.body) as Partial<AttemptMessage> & StreamRecordBody);
  if (body.kind === 'webhook.attempt') return { kind: 'attempt', msg: body as AttemptMessage };
  const image = body.dynamodb?.NewImage;
  if (body.eventName === 'INSERT' && image) {
    const item = unmarshall(image);
    if (item.entity === 'event') return { kind: 'fanout', image: item, recordId: body.eventID ?? null };
  }
  return { kind: 'unknown' };
}

/** Records of one endpoint share a group (order kept); every other record is a group of its own. */
function groupKey(record: SQSRecord): string {
  try {
    const p = parse(record);
    if (p.kind === 'attempt') return `we:${p.msg.endpoint_id}`;
  } catch {
    /* unparseable: its own group, it fails on its own */
  }
  return `msg:${record.messageId}`;
}

async function runRecord(record: SQSRecord, post: Post): Promise<void> {
  const p = parse(record);
  if (p.kind === 'attempt') return onAttemptMessage(p.msg, post);
  // The claim follows the stream record (its eventID survives a redelivery and a re-send of the
  // same body, e.g. a restored queue snapshot); the message id when a record has none.
  if (p.kind === 'fanout') return fanOut(p.image, fanOutToken(p.recordId ?? record.messageId), post);
  logger.warn('webhooks: ignoring an unrecognised message', { messageId: record.messageId });
}

/**
 * Runs `groups` with at most `limit` in flight; each group's items one after the other. `first` is
 * true for the first item of a group started at once (not waiting for a free lane).
 */
async function runGroups<T>(groups: T[][], limit: number, run: (item: T, first: boolean) => Promise<void>): Promise<void> {
  let next = 0;
  const lanes = Math.min(limit, groups.length);
  const lane = async () => {
    for (let g = next++; g < groups.length; g = next++) {
      const items = groups[g]!;
      for (let i = 0; i < items.length; i++) await run(items[i]!, i === 0 && g < lanes);
    }
  };
  await Promise.all(Array.from({ length: lanes }, lane));
}

export interface DispatcherOptions {
  /** How receivers are reached (tests wrap it). */
  post?: Post;
  maxParallel?: number;
  /** One attempt's longest time; the default is the sender's. Tests that shorten it pass it here too. */
  attemptTimeoutMs?: number;
  deadlineMarginMs?: number;
}

/** Hands a record the invocation has no time left for back to the queue (see the module comment). */
async function handBack(record: SQSRecord): Promise<boolean> {
  let p: Parsed;
  try {
    p = parse(record);
  } catch {
    return false;
  }
  if (p.kind !== 'attempt') return false;
  await sendAttempt(p.msg); // unchanged: same token and due time, so it stays the live message
  return true;
}

/** The batch handler (tests wrap it). Without a Lambda context, the batch has no deadline. */
export function createDispatcher(opts: DispatcherOptions = {}) {
  const post = opts.post ?? postWebhook;
  const neededMs = (opts.attemptTimeoutMs ?? ATTEMPT_TIMEOUT_MS) + (opts.deadlineMarginMs ?? DEADLINE_MARGIN_MS);
  return async function dispatchBatch(event: SQSEvent, context?: Pick<Context, 'getRemainingTimeInMillis'>): Promise<SQSBatchResponse> {
    const timeLeft = () => (context ? context.getRemainingTimeInMillis() : Number.POSITIVE_INFINITY);
    const groups = new Map<string, SQSRecord[]>();
    for (const r of event.Records) {
      const key = groupKey(r);
      groups.set(key, [...(groups.get(key) ?? []), r]);
    }
    const failures: SQSBatchResponse['batchItemFailures'] = [];
    await runGroups([...groups.values()], opts.maxParallel ?? MAX_PARALLEL, async (record, first) => {
      try {
        if (!first && timeLeft() < neededMs) {
          if (await handBack(record)) {
            logger.info('webhooks: no time left in this invocation for the message; sent to the queue again', { messageId: record.messageId });
            return;
          }
          logger.warn('webhooks: no time left in this invocation for the message; it will be redelivered', { messageId: record.messageId });
          failures.push({ itemIdentifier: record.messageId });
          return;
        }
        await runRecord(record, post);
      } catch (error) {
        logger.error('webhooks: message failed; it will be redelivered', { messageId: record.messageId, error: error as Error });
        failures.push({ itemIdentifier: record.messageId });
      }
    });
    return { batchItemFailures: failures };
  };
}

/** SQS batch handler: partial failures are reported per message (redelivered, then the DLQ). */
export const dispatchBatch = createDispatcher();
