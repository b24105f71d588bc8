/**
 * `npm start`: the whole service on this machine. PORT (3000), HOST (127.0.0.1), DATA_DIR (./data),
 * LOG_LEVEL (info), LOCAL_CONSUMER_CONCURRENCY (queue consumer invocations at once; default the
 * machine's cores, or the queue's own maximum), LOCAL_MODEL_WORKERS (worker threads for the image
 * models; default the consumer concurrency, 0 = on the main thread), LOCAL_INDEX_LAG_MS (index
 * reads leave out items written less than this long ago, as DynamoDB's indexes may; default 500),
 * DYNAMODB_LOCAL_JVM_OPTS (the
 * emulator's JVM options; default the serial collector and the client compiler). Data persists in DATA_DIR
 * between restarts.
 *
 * Stopping loses nothing: Ctrl-C (SIGINT to the whole process group) and SIGTERM stop the pollers
 * after their current batch (a batch cut short goes back to its queue) and save the queued messages
 * (the emulator children ignore those signals and are stopped by this process afterwards); after a
 * SIGKILL, the start-up reconcilers re-enqueue what the table says is unfinished
 * (local/reconcilers.ts). Run as `node --import tsx local/start.ts` (npm start): the tsx CLI's
 * signal relay would SIGKILL a runtime slow to acknowledge the signal.
 */
import { join } from 'node:path';
import { JavaMissingError } from './dynamodb';
import type { LogLevel } from './log';
import { checkPrerequisites, PrerequisitesMissingError } from './prerequisites';
import { startRuntime, type Runtime } from './runtime';
import { deployedLegacySealedValues } from './deployed-settings';
import { TABLE_STREAM } from '../shared/manifest/wiring';

/** A mistake in the environment the user can fix; printed as its one line. */
class UsageError extends Error {}

function banner(rt: Runtime): string {
  const dataDir = rt.dataDir!;
  const queueLines = [...rt.queues.values()].map((q) => {
    const polled = rt.polledQueues.includes(q.def.name);
    const consumer = polled ? q.def.consumer : `${q.def.consumer} (missing, not polled)`;
    const atOnce = polled ? `${rt.consumerConcurrency[q.def.name]} at once, ` : '';
    return `    ${q.def.name.padEnd(12)} → ${consumer}  [${atOnce}dlq ${q.def.name}-dlq after ${q.def.maxReceiveCount} receives]`;
  });
  const streamLines = rt.streamRules.map((r) => `    ${r.name.padEnd(20)} → ${r.target}`);
  const scheduleLines = rt.schedules.map((s) => `    ${s.name.padEnd(20)} every ${s.everyMinutes} min → ${s.handler}`);
  return [
    '',
    `  API              ${rt.url}`,
    `  DynamoDB Local   ${rt.dynamoEndpoint}  table ${rt.tableName}, data ${join(dataDir, 'dynamodb')}`,
    `  S3 (s3rver)      ${rt.s3Endpoint}  bucket ${rt.bucketName}, data ${join(dataDir, 's3')}`,
    `  Index lag        ${rt.indexLagMs ? `${rt.indexLagMs} ms, as DynamoDB's indexes lag the table` : 'off'} (LOCAL_INDEX_LAG_MS)`,
    `  SQS (fauxqs)     ${rt.sqsEndpoint}  queued messages saved to ${join(dataDir, 'sqs-snapshot.json')} on Ctrl-C; queues:`,
    ...queueLines,
    `  Table stream (one reader, pipe ${TABLE_STREAM.name}) → stream rules → queue:`,
    ...(streamLines.length ? streamLines : ['    (none)']),
    `  Schedules:`,
    ...(scheduleLines.length ? scheduleLines : ['    (none with a handler yet)']),
    '',
    '  Ctrl-C stops everything; queued work is saved and picked up on the next start.',
    '',
  ].join('\n');
}

/**
 * `npm start`'s index lag when LOCAL_INDEX_LAG_MS is unset: DynamoDB's indexes lag the table by
 * "a fraction of a second" usually, so a client of the local service meets it as it would deployed
 * (a list read just after a write can miss it). The tests' runtimes take theirs per suite
 * (test/pipeline/index-lag.test.ts runs a whole flow under 1.5 s).
 */
const START_INDEX_LAG_MS = 500;

async function main(): Promise<void> {
  checkPrerequisites();
  const concurrency = process.env.LOCAL_CONSUMER_CONCURRENCY ? Number(process.env.LOCAL_CONSUMER_CONCURRENCY) : undefined;
  if (concurrency !== undefined && !(Number.isInteger(concurrency) && concurrency >= 1)) {
    throw new UsageError(`LOCAL_CONSUMER_CONCURRENCY must be a whole number ≥ 1 (got "${process.env.LOCAL_CONSUMER_CONCURRENCY}")`);
  }
  const indexLagMs = process.env.LOCAL_INDEX_LAG_MS ? Number(process.env.LOCAL_INDEX_LAG_MS) : START_INDEX_LAG_MS;
  if (indexLagMs !== undefined && !(Number.isInteger(indexLagMs) && indexLagMs >= 0)) {
    throw new UsageError(`LOCAL_INDEX_LAG_MS must be a whole number ≥ 0 (got "${process.env.LOCAL_INDEX_LAG_MS}")`);
  }
  try {
    deployedLegacySealedValues(); // read at each KMS call; a bad value is refused here, before start
  } catch (e) {
    throw new UsageError((e as Error).message);
  }
  // Installed before the runtime starts, so that a signal during start-up is not lost either.
  let runtime: Runtime | null = null;
  const state: { stopping: string | null } = { stopping: null };
  const shutdown = (signal: string) => {
    if (state.stopping) {
      if (runtime) console.info(`${signal}: still saving the queues, please wait...`);
      return;
    }
    state.stopping = signal;
    if (!runtime) return; // still starting: stop right after
    console.info(`\n${signal}: stopping (finishing the running batches, saving the queues)...`);
    runtime.stop().then(
      () => process.exit(0),
      (err: unknown) => {
        console.error(err);
        process.exit(1);
      },
    );
  };
  process.on('SIGINT', () => shutdown('SIGINT'));
  process.on('SIGTERM', () => shutdown('SIGTERM'));

  runtime = await startRuntime({
    port: Number(process.env.PORT ?? 3000),
    host: process.env.HOST ?? '127.0.0.1',
    dataDir: process.env.DATA_DIR ?? 'data',
    publicBaseUrl: process.env.PUBLIC_BASE_URL || undefined,
    logLevel: ((process.env.LOG_LEVEL?.toLowerCase() || undefined) as LogLevel | undefined) ?? 'info',
    consumerConcurrency: concurrency,
    indexLagMs,
    // Without its table or its queues nothing can be kept: exit at once, leaving the run marker, so
    // the next start re-enqueues from the table what was unfinished.
    onChildExit: (what) => {
      console.error(`Stopping: ${what} is gone. Start again with npm start; unfinished work is re-enqueued.`);
      process.exit(1);
    },
  });
  console.info(banner(runtime));
  if (state.stopping) {
    const signal = state.stopping;
    state.stopping = null;
    shutdown(signal);
  }
}

main().catch((err: unknown) => {
  if (err instanceof JavaMissingError || err instanceof PrerequisitesMissingError || err instanceof UsageError) {
    console.error(err.message);
  } else if ((err as NodeJS.ErrnoException).code === 'EADDRINUSE') {
    console.error(`Port ${process.env.PORT ?? 3000} is in use: stop the other process or set PORT.`);
  } else {
    console.error(err);
  }
  process.exit(1);
});
