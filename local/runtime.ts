/**
 * The embedded local runtime: DynamoDB Local, the S3 and SQS emulators, the EventBridge rules,
 * table stream's pipe and rules, schedules and queue pollers of the wiring, and the HTTP API of the route manifest,
 * all in one process tree. The handler modules run in this process with RUNTIME=local.
 *
 * startRuntime starts them in order, each step in a module of its own (local/runtime-*.ts), and
 * stops them in reverse (local/runtime-stops.ts).
 */
import { mkdirSync } from 'node:fs';
import { resolve } from 'node:path';
import { STREAM_RULES, type ScheduleDef, type StreamRuleDef } from '../shared/manifest/wiring';
import { ensureTable, localDynamoClient } from './dynamodb';
import './dynamodb-conflicts'; // DynamoDB's transaction conflicts, emulated for every SDK call of the process (registers its hook)
import { emulateIndexLag } from './index-lag';
import { createEventRouter } from './eventbridge';
import { localRegion } from './lambda';
import { createLog } from './log';
import type { ModelWorkerPool } from './model-pool';
import { queueSender, type LocalQueue } from './sqs';
import { startDynamoDb, startSqs, startStorage } from './runtime-emulators';
import { setHandlerEnvironment } from './runtime-env';
import { startHttpFront, stopTakingRequests } from './runtime-http';
import { carryQueuesAcrossRestarts, reconcileAtStart } from './runtime-restart';
import { startModelWorkers, startPollers, startSchedules, startStreamPipes } from './runtime-consumers';
import { stopInReverse, type Stop } from './runtime-stops';
import type { RuntimeOptions, StartContext } from './runtime-options';

export { deployedLongPollMaxWaits, deployedLongPollMaxWaitsPerOrg, deployedLongPollSeconds } from './deployed-settings';
export type { RuntimeOptions } from './runtime-options';

export interface Runtime {
  url: string;
  s3Endpoint: string;
  /** Where the S3 emulator keeps the bucket's files. */
  s3Directory: string;
  sqsEndpoint: string;
  /** The SQS emulator's process (tests stop it to see the runtime notice). */
  sqsPid: number;
  dynamoEndpoint: string;
  tableName: string;
  bucketName: string;
  dataDir: string | null;
  queues: Map<string, LocalQueue>;
  /** Queues whose consumer runs (module present and pollers enabled). */
  polledQueues: string[];
  /** Concurrent consumer invocations of each polled queue. */
  consumerConcurrency: Record<string, number>;
  /** How long index reads leave out fresh writes (local/index-lag.ts); 0: off. */
  indexLagMs: number;
  /** The model worker threads (null: the models run on the main thread). */
  modelWorkers: ModelWorkerPool | null;
  /** The stream rules the table stream's poller routes to (none when streams are off). */
  streamRules: readonly StreamRuleDef[];
  schedules: ScheduleDef[];
  stop(): Promise<void>;
}

export async function startRuntime(opts: RuntimeOptions = {}): Promise<Runtime> {
  const log = createLog(opts.logLevel ?? 'info');
  const host = opts.host ?? '127.0.0.1';
  const inMemory = opts.inMemory ?? false;
  const dataDir = inMemory ? null : resolve(opts.dataDir ?? 'data');
  if (dataDir) mkdirSync(dataDir, { recursive: true });
  const tableName = opts.tableName ?? 'marketplace';
  const bucketName = opts.bucketName ?? 'marketplace-media';
  process.env.AWS_REGION ??= 'us-east-1';
  const region = localRegion();

  const stops: Stop[] = [];
  const ctx: StartContext = { opts, log, host, dataDir, tableName, bucketName, region, stops };
  /**
   * An emulator child that dies leaves the runtime unable to keep its promises (queued work, the
   * table): say so loudly and let the caller stop (`npm start` exits non-zero; the next start
   * finds the run marker and re-enqueues unfinished work from the table).
   */
  const childDied = (what: string, code: number | null) => {
    log.error(`${what} exited unexpectedly (code ${code ?? 'none'}); the runtime cannot go on without it`);
    opts.onChildExit?.(what, code);
  };
  const stopAll = () => stopInReverse(stops, log);

  try {
    emulateIndexLag(opts.indexLagMs ?? 0);
    stops.push(() => emulateIndexLag(0));
    const { dynamo, dynamoEndpoint } = await startDynamoDb(ctx, childDied);
    const { sqsEmulator, sqs, sandboxDelay, queues } = await startSqs(ctx, childDied);
    const run = await carryQueuesAcrossRestarts(ctx, sqs, sqsEmulator, queues);
    const send = queueSender(sqs, queues);
    const router = createEventRouter({ bucketName, send, log });
    const { s3Dir, sts, s3, uploadSignerRoleArn } = await startStorage(ctx, router);

    const { server, url, markReady, longPollSeconds } = await startHttpFront(ctx);
    setHandlerEnvironment(ctx, { dynamo, dynamoEndpoint, sqsEmulator, queues, sandboxDelay, sts, s3, uploadSignerRoleArn, url, longPollSeconds });

    const ddb = localDynamoClient(dynamoEndpoint);
    stops.push(() => ddb.destroy());
    await ensureTable(ddb, tableName);

    await reconcileAtStart(ctx, run, send, router);

    // Before the pollers: stops run in reverse, so the pool stops after their last batch.
    const modelWorkers = startModelWorkers(ctx);
    const { polledQueues, consumerConcurrency } = startPollers(ctx, sqs, queues);
    await startStreamPipes(ctx, dynamoEndpoint, send);
    const scheduler = startSchedules(ctx);

    // Stops run in reverse: first of all, the API takes no new requests (those running finish), so
    // no new work reaches the queues while the pollers finish their batches and the queues are saved.
    stops.push(stopTakingRequests(server));

    markReady();

    return {
      url,
      s3Endpoint: s3.endpoint,
      s3Directory: s3Dir,
      sqsEndpoint: sqsEmulator.endpoint,
      sqsPid: sqsEmulator.pid,
      dynamoEndpoint,
      tableName,
      bucketName,
      dataDir,
      queues,
      polledQueues,
      consumerConcurrency,
      indexLagMs: opts.indexLagMs ?? 0,
      modelWorkers,
      streamRules: opts.enableStreams ?? true ? STREAM_RULES : [],
      schedules: scheduler?.active ?? [],
      stop: stopAll,
    };
  } catch (err) {
    await stopAll();
    throw err;
  }
}
