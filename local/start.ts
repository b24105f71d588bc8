/**
 * `npm start`: the whole service on this machine. PORT (3000), HOST (127.0.0.1), DATA_DIR (./data),
 * LOG_LEVEL (info). Data persists in DATA_DIR between restarts; queued messages do not (see
 * local/reconcilers.ts).
 */
import { join } from 'node:path';
import { JavaMissingError } from './dynamodb';
import type { LogLevel } from './log';
import { startRuntime, type Runtime } from './runtime';

function banner(rt: Runtime): string {
  const dataDir = rt.dataDir!;
  const queueLines = [...rt.queues.values()].map((q) => {
    const consumer = rt.polledQueues.includes(q.def.name) ? q.def.consumer : `${q.def.consumer} (missing, not polled)`;
    return `    ${q.def.name.padEnd(12)} → ${consumer}  [dlq ${q.def.name}-dlq after ${q.def.maxReceiveCount} receives]`;
  });
  const pipeLines = rt.pipes.map((p) => `    ${p.name.padEnd(20)} → ${p.target}`);
  const scheduleLines = rt.schedules.map((s) => `    ${s.name.padEnd(20)} every ${s.everyMinutes} min → ${s.handler}`);
  return [
    '',
    `  API              ${rt.url}`,
    `  DynamoDB Local   ${rt.dynamoEndpoint}  table ${rt.tableName}, data ${join(dataDir, 'dynamodb')}`,
    `  S3 (s3rver)      ${rt.s3Endpoint}  bucket ${rt.bucketName}, data ${join(dataDir, 's3')}`,
    `  SQS (fauxqs)     ${rt.sqsEndpoint}  queued messages saved to ${join(dataDir, 'sqs-snapshot.json')} on Ctrl-C; queues:`,
    ...queueLines,
    `  Stream pipes (DynamoDB stream → queue):`,
    ...(pipeLines.length ? pipeLines : ['    (none)']),
    `  Schedules:`,
    ...(scheduleLines.length ? scheduleLines : ['    (none with a handler yet)']),
    '',
    '  Ctrl-C stops everything.',
    '',
  ].join('\n');
}

async function main(): Promise<void> {
  const runtime = await startRuntime({
    port: Number(process.env.PORT ?? 3000),
    host: process.env.HOST ?? '127.0.0.1',
    dataDir: process.env.DATA_DIR ?? 'data',
    publicBaseUrl: process.env.PUBLIC_BASE_URL || undefined,
    logLevel: (process.env.LOG_LEVEL as LogLevel | undefined) ?? 'info',
  });
  console.info(banner(runtime));

  let stopping = false;
  const shutdown = (signal: string) => {
    if (stopping) return;
    stopping = true;
    console.info(`\n${signal}: stopping...`);
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
}

main().catch((err: unknown) => {
  if (err instanceof JavaMissingError) {
    console.error(err.message);
  } else if ((err as NodeJS.ErrnoException).code === 'EADDRINUSE') {
    console.error(`Port ${process.env.PORT ?? 3000} is in use: stop the other process or set PORT.`);
  } else {
    console.error(err);
  }
  process.exit(1);
});
