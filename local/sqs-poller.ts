/**
 * One poller per queue that invokes the consumer module the way a Lambda event source mapping
 * with ReportBatchItemFailures does (several batches at once, the consumer's timeout, recursive
 * loop detection; opt-in duplicate and out-of-order deliveries), and how many invocations a
 * queue's consumer runs at once locally.
 */
import { setMaxListeners } from 'node:events';
import { availableParallelism } from 'node:os';
import {
  ChangeMessageVisibilityBatchCommand,
  DeleteMessageBatchCommand,
  DeleteMessageCommand,
  ReceiveMessageCommand,
  SendMessageCommand,
  type SQSClient,
} from '@aws-sdk/client-sqs';
import type { SQSEvent, SQSRecord } from 'aws-lambda';
import { deployedConsumerCap, type QueueDef } from '../shared/manifest/wiring';
import { invokeWithTimeout, lambdaContext, localRegion, type AnyHandler } from './lambda';
import { RECURSION_LIMIT, stoppedByLoopDetection } from './lineage';
import type { LocalQueue } from './sqs';
import { asEarlierReceive, sdkAttributes, shuffled, successfulRecords, toSqsRecord, type OutOfOrderOptions } from './sqs-records';
import type { Log } from './log';

export interface QueuePollerOptions {
  client: SQSClient;
  queue: Pick<LocalQueue, 'url' | 'arn'> &
    Partial<Pick<LocalQueue, 'dlqUrl'>> & { def: Pick<QueueDef, 'name' | 'batchSize' | 'consumerTimeoutSeconds' | 'consumerMemoryMb' | 'maxReceiveCount' | 'recursiveLoop'> };
  /** The consumer; resolved lazily so a module is imported only once messages arrive. */
  handler: () => Promise<AnyHandler>;
  log: Log;
  /** Long-poll wait (seconds); small values make stop() quicker in tests. */
  waitTimeSeconds?: number;
  /**
   * Concurrent invocations of the consumer (each with its own batch), as Lambda's event source
   * mapping runs several at once. Default: the machine's cores.
   */
  concurrency?: number;
  /**
   * SQS delivers at least once: a message can reach two receivers. On, every batch is also handed
   * to a second, earlier receiver at the same time (tests of idempotent consumers). Off by default.
   */
  duplicateDeliveries?: boolean;
  /**
   * A standard queue's ordering is best effort: messages may arrive, and a batch may hold them, in
   * another order than they were sent. On, every batch is handed over shuffled, and some messages
   * on their first receive are held back (handed back to the queue for a moment, so messages sent
   * after them overtake them). Off by default (see QueuePoller.outOfOrder).
   */
  outOfOrderDeliveries?: boolean | OutOfOrderOptions;
}

/** The default number of concurrent consumer invocations per queue: the machine's cores. */
export function defaultConsumerConcurrency(): number {
  return Math.max(1, availableParallelism());
}

/**
 * A queue's consumer invocations at once, locally: the wiring's cap (a consumer that waits on the
 * network), else one per core, but never more than a deploy allows at once (the quota cap of a
 * Bedrock or Transcribe consumer, deployedConsumerCap).
 */
export function localConsumerConcurrency(def: Pick<QueueDef, 'maxConcurrency' | 'access'>, cores = defaultConsumerConcurrency()): number {
  return def.maxConcurrency ?? Math.min(cores, deployedConsumerCap(def) ?? Infinity);
}

/**
 * Polls one queue and invokes its consumer per batch, until stopped: up to `concurrency` batches
 * in flight at once, each receive → invoke → delete on its own, as Lambda's SQS event source
 * mapping does (so one slow batch holds one slot, not the queue). Each invocation has the queue's
 * `consumerTimeoutSeconds` (its context's getRemainingTimeInMillis counts down from it); one that
 * runs longer fails its whole batch, as a Lambda timeout does.
 */
export class QueuePoller {
  private running = false;
  private readonly abort = new AbortController();
  private loops: Promise<void>[] = [];
  private inFlight = 0;
  private peak = 0;
  private timeouts = 0;
  private held = 0;
  private loopsStopped = 0;
  private readonly random: () => number;

  constructor(private readonly opts: QueuePollerOptions) {
    // Every concurrent long poll listens on the one stop signal.
    setMaxListeners(0, this.abort.signal);
    const ooo = opts.outOfOrderDeliveries;
    this.random = (typeof ooo === 'object' && ooo.random) || Math.random;
  }

  get concurrency(): number {
    return Math.max(1, Math.floor(this.opts.concurrency ?? defaultConsumerConcurrency()));
  }

  /** The most invocations that ran at the same time since start (for tests and benchmarks). */
  get peakConcurrency(): number {
    return this.peak;
  }

  /** Invocations that ran past the consumer's timeout since start (their batches failed). */
  get timedOutBatches(): number {
    return this.timeouts;
  }

  /** Receives handed back unrun by `outOfOrderDeliveries` since start (for tests). */
  get heldBackReceives(): number {
    return this.held;
  }

  start(): void {
    if (this.running) return;
    this.running = true;
    this.loops = Array.from({ length: this.concurrency }, () => this.run());
  }

  async stop(): Promise<void> {
    this.running = false;
    this.abort.abort();
    await Promise.all(this.loops);
  }

  private async run(): Promise<void> {
    while (this.running) {
      try {
        await this.pollOnce();
      } catch (err) {
        if (!this.running) break;
        this.opts.log.error(`sqs ${this.opts.queue.def.name}: poll failed: ${(err as Error).message}`);
        await new Promise((r) => setTimeout(r, 1000));
      }
    }
  }

  /** One invocation of the consumer with these records (its own copy of them), and its outcome. */
  private async invoke(records: SQSRecord[]): Promise<{ error: unknown } | { result: unknown }> {
    const { queue, log } = this.opts;
    const event: SQSEvent = { Records: structuredClone(records) };
    this.peak = Math.max(this.peak, ++this.inFlight);
    try {
      // Loading the module is Lambda's init phase, outside the invocation's timeout.
      const handler = await this.opts.handler();
      const context = lambdaContext(`${queue.def.name}-consumer`, queue.def.consumerTimeoutSeconds, queue.def.consumerMemoryMb);
      const invoked = await invokeWithTimeout(handler, event, context, queue.def.consumerTimeoutSeconds * 1000);
      if ('timedOut' in invoked) {
        this.timeouts++;
        log.error(
          `sqs ${queue.def.name}: consumer timed out after ${queue.def.consumerTimeoutSeconds} s on a batch of ${records.length}; ` +
            'nothing is deleted, the messages come back after their visibility timeout',
        );
      } else if ('error' in invoked) log.error(`sqs ${queue.def.name}: consumer failed for a batch of ${records.length}`, invoked.error);
      return invoked;
    } catch (error) {
      log.error(`sqs ${queue.def.name}: consumer failed for a batch of ${records.length}`, error);
      return { error };
    } finally {
      this.inFlight--;
    }
  }

  /** Receives one batch (long poll), invokes the consumer and deletes what succeeded. Returns the batch size. */
  async pollOnce(): Promise<number> {
    const { client, queue, log } = this.opts;
    const received = await client.send(
      new ReceiveMessageCommand({
        QueueUrl: queue.url,
        MaxNumberOfMessages: queue.def.batchSize,
        WaitTimeSeconds: this.opts.waitTimeSeconds ?? 20,
        MessageSystemAttributeNames: ['All'],
        MessageAttributeNames: ['All'],
      }),
      { abortSignal: this.abort.signal },
    );
    const messages = received.Messages ?? [];
    if (!messages.length) return 0;

    const taken = messages.map((m) => toSqsRecord(m, queue.arn, localRegion()));
    const running = await this.stopRecursiveLoops(taken);
    const records = this.opts.outOfOrderDeliveries ? await this.outOfOrder(running) : running;
    if (!records.length) return taken.length;
    // At-least-once, made certain (tests): every batch is also handed, at the same time, to an
    // earlier receiver of the same messages (one receive fewer, a receipt handle of its own), as
    // when SQS delivers a message to two receivers. Only the latest receipt handle is sure to
    // delete a message on SQS (a delete with an older one "might not" delete it: API_DeleteMessage),
    // so only the latest copy's outcome deletes here: what the earlier copy completes and the
    // latest fails comes back.
    const earlier = this.opts.duplicateDeliveries ? [this.invoke(records.map(asEarlierReceive))] : [];
    const [outcome] = await Promise.all([this.invoke(records), ...earlier]);
    const done = successfulRecords(records, outcome!);
    if (done.length) {
      await client.send(
        new DeleteMessageBatchCommand({
          QueueUrl: queue.url,
          Entries: done.map((r, i) => ({ Id: String(i), ReceiptHandle: r.receiptHandle })),
        }),
      );
    }
    const failed = records.length - done.length;
    if (failed && !this.running) {
      // Stopping (a signal may have cut the batch short, e.g. a killed ffmpeg): hand the rest back
      // now, so the saved queue has them ready rather than hidden for a whole visibility timeout.
      const left = records.filter((r) => !done.includes(r));
      await client
        .send(
          new ChangeMessageVisibilityBatchCommand({
            QueueUrl: queue.url,
            Entries: left.map((r, i) => ({ Id: String(i), ReceiptHandle: r.receiptHandle, VisibilityTimeout: 0 })),
          }),
        )
        .catch((err: Error) => log.warn(`sqs ${queue.def.name}: could not release ${left.length} messages on stop: ${err.message}`));
    }
    log.debug(`sqs ${queue.def.name}: ${done.length} done, ${failed} left for redelivery`);
    return taken.length;
  }

  /**
   * Lambda's recursive loop detection (local/lineage.ts): a record whose chain of events has
   * already invoked this consumer RECURSION_LIMIT times is not handed to it; unless the wiring
   * allows the loop (`recursiveLoop: 'allow'`, RecursiveLoop Allow deployed), it goes to the
   * queue's dead-letter queue, as Lambda sends it there, and the log says why. The rest of the
   * batch runs.
   */
  private async stopRecursiveLoops(records: SQSRecord[]): Promise<SQSRecord[]> {
    const { client, queue, log } = this.opts;
    if (queue.def.recursiveLoop === 'allow' || !queue.dlqUrl) return records;
    const stopped = records.filter((r) => stoppedByLoopDetection(r, queue.def.name));
    if (!stopped.length) return records;
    // Counted when decided, before the message moves: whoever sees it in the dead-letter queue sees the count.
    this.loopsStopped += stopped.length;
    for (const r of stopped) {
      log.error(
        `sqs ${queue.def.name}: recursive loop detected: message ${r.messageId} would invoke the consumer a ${RECURSION_LIMIT + 1}th time in one chain of events; Lambda stops it, so it goes to the dead-letter queue (allow a designed loop with the wiring's recursiveLoop)`,
      );
      await client.send(
        new SendMessageCommand({
          QueueUrl: queue.dlqUrl,
          MessageBody: r.body,
          ...(Object.keys(r.messageAttributes).length ? { MessageAttributes: sdkAttributes(r.messageAttributes) } : {}),
          ...(r.attributes.AWSTraceHeader ? { MessageSystemAttributes: { AWSTraceHeader: { DataType: 'String', StringValue: r.attributes.AWSTraceHeader } } } : {}),
        }),
      );
      await client.send(new DeleteMessageCommand({ QueueUrl: queue.url, ReceiptHandle: r.receiptHandle }));
    }
    return records.filter((r) => !stopped.includes(r));
  }

  /** Records Lambda's recursive loop detection stopped since start (for tests). */
  get recursiveLoopsStopped(): number {
    return this.loopsStopped;
  }

  /**
   * Out-of-order delivery, as a standard queue may do it (opt-in). SQS: "messages may occasionally
   * arrive out of order", the order is best effort only
   * (https://docs.aws.amazon.com/AWSSimpleQueueService/latest/SQSDeveloperGuide/standard-queues.html);
   * Lambda promises to hand messages over in the order received only for FIFO queues, and runs
   * several batches of a standard queue at once
   * (https://docs.aws.amazon.com/lambda/latest/dg/services-sqs-scaling.html). fauxqs hands them
   * out strictly in send order, so here:
   * - the batch goes to the consumer shuffled;
   * - a message on its first receive is held back with probability `holdBackProbability`: made
   *   visible again after 0..`maxHoldBackSeconds` s (ChangeMessageVisibility), which puts it behind
   *   every message sent after it that is visible by then. It stays in the queue all along (a stop
   *   saves it with the in-flight messages), and the receive counts: on SQS every receive counts
   *   towards maxReceiveCount, processed or not
   *   (https://docs.aws.amazon.com/AWSSimpleQueueService/latest/SQSDeveloperGuide/sqs-dead-letter-queues.html),
   *   e.g. a batch Lambda received while the function was throttled, which comes back after its
   *   visibility timeout (https://docs.aws.amazon.com/lambda/latest/dg/services-sqs-configure.html).
   *   So a message is held back at most once, and only when maxReceiveCount leaves it a later
   *   receive: every message reaches the consumer before it could reach the dead-letter queue, with
   *   maxReceiveCount − 1 receives for the consumer at least. One that cannot be handed back
   *   (ChangeMessageVisibility refused) is delivered now, not hidden for a whole visibility timeout.
   */
  private async outOfOrder(records: SQSRecord[]): Promise<SQSRecord[]> {
    const { client, queue, log } = this.opts;
    const ooo = typeof this.opts.outOfOrderDeliveries === 'object' ? this.opts.outOfOrderDeliveries : {};
    const p = ooo.holdBackProbability ?? 0.3;
    const maxSeconds = Math.max(0, Math.floor(ooo.maxHoldBackSeconds ?? 2));
    const order = shuffled(records, this.random);
    const hold = order.filter((r) => r.attributes.ApproximateReceiveCount === '1' && queue.def.maxReceiveCount >= 2 && this.running && this.random() < p);
    if (!hold.length) return order;
    let refused = new Set<string>(hold.map((r) => r.messageId));
    try {
      const res = await client.send(
        new ChangeMessageVisibilityBatchCommand({
          QueueUrl: queue.url,
          Entries: hold.map((r, i) => ({ Id: String(i), ReceiptHandle: r.receiptHandle, VisibilityTimeout: Math.floor(this.random() * (maxSeconds + 1)) })),
        }),
      );
      refused = new Set((res.Failed ?? []).map((f) => hold[Number(f.Id)]!.messageId));
    } catch (err) {
      log.warn(`sqs ${queue.def.name}: could not hold back ${hold.length} messages, delivering them now: ${(err as Error).message}`);
    }
    this.held += hold.length - refused.size;
    log.debug(`sqs ${queue.def.name}: ${hold.length - refused.size} of ${records.length} held back behind later messages`);
    return order.filter((r) => !hold.includes(r) || refused.has(r.messageId));
  }
}
