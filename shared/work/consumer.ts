/**
 * SQS batch consumer for the pipeline stages: the records of a batch run in parallel, each failure
 * is reported as a partial batch failure (`batchItemFailures`), so only that message comes back
 * and, after maxReceiveCount receives, rests in the queue's DLQ (its alarm fires; the redrive in
 * docs/scoring.md brings it back).
 *
 * Backoff (D66): a failed message is made visible again after `retryDelaySeconds(receive count)`
 * (ChangeMessageVisibility on its receipt): 30 s, 60 s, 120 s … up to 15 minutes, so a provider
 * outage is ridden out instead of burning the receives in minutes. The submission stays
 * `pending_score` meanwhile; nothing is decided on a failure.
 * PIPELINE_RETRY_BASE_SECONDS / PIPELINE_RETRY_MAX_SECONDS change the curve (tests use 1 s).
 */
import type { Context, SQSBatchResponse, SQSEvent, SQSRecord } from 'aws-lambda';
import { withInvocationTime } from './object-budget';
import { config } from '../config';
import { logger, withChildLogScope, withInvocationScope } from '../logger';
import { changeMessageVisibility, getQueueUrl } from '../queues';
import { parseEvent, RetryLater, type StageOutcome } from './stage-message';

const envNumber = (name: string, fallback: number) => {
  const n = Number(process.env[name]);
  return Number.isFinite(n) && n >= 0 && process.env[name] !== '' && process.env[name] !== undefined ? n : fallback;
};

/** Seconds before the n-th failed receive is tried again: base · 2^(n−1), capped. */
export function retryDelaySeconds(receiveCount: number): number {
  const base = envNumber('PIPELINE_RETRY_BASE_SECONDS', 30);
  const max = envNumber('PIPELINE_RETRY_MAX_SECONDS', 900);
  const n = Math.max(1, Math.floor(receiveCount) || 1);
  return Math.min(max, Math.round(base * 2 ** Math.min(n - 1, 20)));
}

const urls = new Map<string, Promise<string>>();
/** The queue URL of a record: QUEUE_URL_<NAME> when set, else GetQueueUrl by the ARN's name and account. */
function queueUrlOf(record: SQSRecord): Promise<string> {
  const [, , , , account, name] = record.eventSourceARN.split(':');
  const known = name ? config().queueUrls[name] : undefined;
  if (known) return Promise.resolve(known);
  let p = urls.get(record.eventSourceARN);
  if (!p) {
    p = getQueueUrl(name ?? '', account);
    p.catch(() => urls.delete(record.eventSourceARN));
    urls.set(record.eventSourceARN, p);
  }
  return p;
}

async function backOff(record: SQSRecord, stage: string): Promise<void> {
  const receives = Number(record.attributes?.ApproximateReceiveCount ?? 1);
  const delay = retryDelaySeconds(receives);
  try {
    await changeMessageVisibility(await queueUrlOf(record), record.receiptHandle, delay);
  } catch (err) {
    // Without it the message still returns, after the queue's visibility timeout.
    logger.warn(`${stage}: could not set the retry delay`, { error: err as Error, message_id: record.messageId });
  }
}

export function stageConsumer(stage: string, run: (key: string) => Promise<StageOutcome>) {
  return messageConsumer(stage, parseEvent, ({ key }) => run(key));
}

/** A consumer of any message shape: `parse` throws on poison (retried, then the DLQ), `run` does the work. */
export function messageConsumer<T>(stage: string, parse: (body: string) => T, run: (message: T) => Promise<StageOutcome>) {
  return withInvocationScope((event: SQSEvent, context?: Context): Promise<SQSBatchResponse> => withInvocationTime(context?.getRemainingTimeInMillis?.(), async () => {
    const failures: SQSBatchResponse['batchItemFailures'] = [];
    await Promise.all(
      event.Records.map((record) => withChildLogScope({ stage, message_id: record.messageId }, async () => {
        try {
          const outcome = await run(parse(record.body));
          logger.debug(`${stage}: ${outcome}`, { message_id: record.messageId });
        } catch (err) {
          const waiting = err instanceof RetryLater;
          logger[waiting ? 'info' : 'error'](`${stage}: ${waiting ? 'message arrived early' : 'message failed'}, retried with backoff`, {
            error: err as Error,
            message_id: record.messageId,
            receive_count: record.attributes?.ApproximateReceiveCount,
          });
          await backOff(record, stage);
          failures.push({ itemIdentifier: record.messageId });
        }
      })),
    );
    return { batchItemFailures: failures };
  }));
}
