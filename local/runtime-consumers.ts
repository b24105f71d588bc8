/**
 * What runs the handlers off the HTTP path in the local runtime (startRuntime, local/runtime.ts):
 * the model worker threads the consumers offload to, the queue pollers (Lambda's event source
 * mappings), the table stream's pipes and the scheduler. Each pushes its stop as it starts.
 */
import { join } from 'node:path';
import type { SQSClient } from '@aws-sdk/client-sqs';
import { imageAnalysisOffload, setImageAnalysisOffload } from '../shared/media/offload';
import { QUEUES } from '../shared/manifest/wiring';
import { grantedTo, handlerModuleExists, loadHandler } from './lambda';
import { ModelWorkerPool } from './model-pool';
import { startScheduler, type Scheduler } from './scheduler';
import type { LocalQueue, QueueSender } from './sqs';
import { defaultConsumerConcurrency, localConsumerConcurrency, QueuePoller } from './sqs-poller';
import { fileCheckpoints, localStreamsClient, memoryCheckpoints, StreamPipes } from './streams';
import type { RuntimeOptions, StartContext } from './runtime-options';

function modelWorkerCount(opts: RuntimeOptions): number {
  const env = process.env.LOCAL_MODEL_WORKERS;
  const n = opts.modelWorkers ?? (env ? Number(env) : typeof opts.consumerConcurrency === 'number' ? opts.consumerConcurrency : defaultConsumerConcurrency());
  if (!(Number.isInteger(n) && n >= 0)) throw new Error(`model workers must be a whole number ≥ 0 (LOCAL_MODEL_WORKERS: "${env}")`);
  return n;
}

/** The model worker threads, the image analysis offloaded to them; null when there are none (0). */
export function startModelWorkers(ctx: StartContext): ModelWorkerPool | null {
  const { opts, log, stops } = ctx;
  const workers = modelWorkerCount(opts);
  const modelWorkers =
    workers > 0
      ? new ModelWorkerPool({
          size: workers,
          // As Lambda ends an invocation past its timeout: no analysis outlives the longest consumer's.
          taskTimeoutMs: Math.max(...QUEUES.map((q) => q.consumerTimeoutSeconds)) * 1000,
          onWorkerExit: (m) => log.error(m),
        })
      : null;
  if (modelWorkers) {
    setImageAnalysisOffload(modelWorkers);
    stops.push(() => {
      if (imageAnalysisOffload() === modelWorkers) setImageAnalysisOffload(null);
      return modelWorkers.stop();
    });
  }
  return modelWorkers;
}

/**
 * A poller per queue whose consumer module exists (unless pollers are off; only `opts.onlyQueues`
 * when given): the queues polled, and each one's concurrent consumer invocations.
 */
export function startPollers(ctx: StartContext, sqs: SQSClient, queues: Map<string, LocalQueue>): { polledQueues: string[]; consumerConcurrency: Record<string, number> } {
  const { opts, log, stops } = ctx;
  const polledQueues: string[] = [];
  const consumerConcurrency: Record<string, number> = {};
  if (opts.enablePollers ?? true) {
    for (const q of queues.values()) {
      if (opts.onlyQueues && !opts.onlyQueues.includes(q.def.name)) continue;
      if (!handlerModuleExists(q.def.consumer)) {
        log.warn(`sqs ${q.def.name}: consumer ${q.def.consumer} does not exist yet; queue not polled`);
        continue;
      }
      const cc = opts.consumerConcurrency;
      const concurrency = (typeof cc === 'number' ? cc : cc?.[q.def.name]) ?? localConsumerConcurrency(q.def);
      const poller = new QueuePoller({ client: sqs, queue: q, handler: async () => grantedTo(q.def.name, q.def.access, await loadHandler(q.def.consumer), { consumes: q.def.name }), log, waitTimeSeconds: opts.pollWaitSeconds, concurrency, duplicateDeliveries: opts.duplicateDeliveries, outOfOrderDeliveries: opts.outOfOrderDeliveries });
      poller.start();
      stops.push(() => poller.stop());
      polledQueues.push(q.def.name);
      consumerConcurrency[q.def.name] = poller.concurrency;
    }
  }
  return { polledQueues, consumerConcurrency };
}

/** The table stream's pipes to the stream rules' queues (unless streams are off). */
export async function startStreamPipes(ctx: StartContext, dynamoEndpoint: string, send: QueueSender): Promise<void> {
  const { opts, log, dataDir, tableName, stops } = ctx;
  if (opts.enableStreams ?? true) {
    const streamsClient = localStreamsClient(dynamoEndpoint);
    stops.push(() => streamsClient.destroy());
    const pipes = new StreamPipes({
      client: streamsClient,
      tableName,
      send,
      log,
      checkpoints: dataDir ? fileCheckpoints(join(dataDir, 'stream-checkpoints.json')) : memoryCheckpoints(),
      deadLetterFile: dataDir ? join(dataDir, 'stream-dead-letters.jsonl') : undefined,
      intervalMs: opts.streamPollIntervalMs,
    });
    await pipes.start();
    stops.push(() => pipes.stop());
  }
}

/** The wiring's schedules on timers (unless the scheduler is off: null). */
export function startSchedules(ctx: StartContext): Scheduler | null {
  const { opts, log, stops } = ctx;
  let scheduler: Scheduler | null = null;
  if (opts.enableScheduler ?? true) {
    scheduler = startScheduler({ log });
    stops.push(() => scheduler!.stop());
  }
  return scheduler;
}
