/**
 * The embedded local runtime: DynamoDB Local, the S3 and SQS emulators, the EventBridge rules,
 * table stream's pipe and rules, schedules and queue pollers of the wiring, and the HTTP API of the route manifest,
 * all in one process tree. The handler modules run in this process with RUNTIME=local.
 */
import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { resetClients } from '../shared/db/client';
import { resetConfig } from '../shared/config';
import { QUEUES, STREAM_RULES, type ScheduleDef, type StreamRuleDef } from '../shared/manifest/wiring';
import { ensureTable, localDynamoClient, startDynamoDbLocal, type DynamoDbLocal } from './dynamodb';
import './dynamodb-conflicts'; // DynamoDB's transaction conflicts, emulated for every SDK call of the process (registers its hook)
import { createEventRouter } from './eventbridge';
import { createHttpServer, registerLocalPage, type IntegrationTimeouts } from './http';
import { localCdnPage } from './cdn';
import { localCheckoutPage } from '../shared/payments/local-checkout-page';
import { grantedTo, handlerModuleExists, loadHandler, localRegion, LOCAL_ACCOUNT_ID } from './lambda';
import { createLog, type LogLevel } from './log';
import { registerReconciler, runMarker, runReconcilers } from './reconcilers';
import { UNFINISHED_WORK, webhooksReconciler } from './reconcile-unfinished';
import { ensureLocalSecrets } from './secrets';
import { resetSecrets } from '../shared/secrets';
import { resetSealer } from '../shared/secrets/sealer';
import { resetS3 } from '../shared/storage/s3';
import { S3_LOCAL_CREDENTIALS, startS3Emulator } from './s3';
import { IssuedCredentials, startStsEmulator } from './sts';
import { startScheduler, type Scheduler } from './scheduler';
import { countMessages, readSnapshot, removeSnapshot, restoreSnapshot, takeSnapshot, writeSnapshot } from './sqs-snapshot';
import { createQueues, localSqsClient, queueSender, queueUrlEnvName, startSqsEmulator, type LocalQueue } from './sqs';
import { defaultConsumerConcurrency, localConsumerConcurrency, QueuePoller } from './sqs-poller';
import type { OutOfOrderOptions } from './sqs-records';
import { fileCheckpoints, localStreamsClient, memoryCheckpoints, StreamPipes } from './streams';
import { ModelWorkerPool } from './model-pool';
import { longPollTimeoutSeconds } from '../shared/manifest/timeouts';

/**
 * A setting as a default deployment has it: the environment variable `env` when set, else the
 * context value `key` of cdk.json (what `cdk deploy` reads), else the stack's default.
 */
function deployedSetting(env: string, key: string, stackDefault: number): number {
  const fromEnv = process.env[env];
  if (fromEnv) return Number(fromEnv);
  try {
    const ctx = (JSON.parse(readFileSync(resolve(__dirname, '..', 'cdk.json'), 'utf8')) as { context?: Record<string, unknown> }).context ?? {};
    return ctx[key] === undefined ? stackDefault : Number(ctx[key]);
  } catch {
    return stackDefault;
  }
}

/** The long-poll budget (lib/stack.ts: context `longPollSeconds`, default 25); `LOCAL_LONG_POLL_SECONDS`. */
export const deployedLongPollSeconds = () => deployedSetting('LOCAL_LONG_POLL_SECONDS', 'longPollSeconds', 25);
/** Held long polls per long-poll route (lib/settings.ts `longPollMaxWaits`, default 20); `LOCAL_LONG_POLL_MAX_WAITS`. */
export const deployedLongPollMaxWaits = () => deployedSetting('LOCAL_LONG_POLL_MAX_WAITS', 'longPollMaxWaits', 20);
/** Held long polls per long-poll route and organization (`longPollMaxWaitsPerOrg`, default 5); `LOCAL_LONG_POLL_MAX_WAITS_PER_ORG`. */
export const deployedLongPollMaxWaitsPerOrg = () => deployedSetting('LOCAL_LONG_POLL_MAX_WAITS_PER_ORG', 'longPollMaxWaitsPerOrg', 5);
import { imageAnalysisOffload, setImageAnalysisOffload } from '../shared/media/offload';

export interface RuntimeOptions {
  /** HTTP port; 0 picks a free one. Default 3000. */
  port?: number;
  host?: string;
  /** Where DynamoDB, S3 objects, stream checkpoints and the cursor secret persist. Default ./data. */
  dataDir?: string;
  /** Nothing persists: DynamoDB -inMemory (unless dynamoEndpoint), S3 in a temp directory. */
  inMemory?: boolean;
  /** Use an already running DynamoDB Local (the test run shares one) instead of starting one. */
  dynamoEndpoint?: string;
  tableName?: string;
  bucketName?: string;
  enableScheduler?: boolean;
  enablePollers?: boolean;
  /** With pollers on: poll only these queues (tests that exercise one consumer); default all. */
  onlyQueues?: readonly string[];
  enableStreams?: boolean;
  logLevel?: LogLevel;
  /** Fixed cursor secret (tests); otherwise a random one persisted in dataDir. */
  cursorSecret?: string;
  publicBaseUrl?: string;
  /** D40 delay of the sandbox queue; default SANDBOX_DELAY_SECONDS, else the wiring's. */
  sandboxDelaySeconds?: number;
  /** Long-poll wait of the queue pollers; shorter makes stop() quicker. */
  pollWaitSeconds?: number;
  streamPollIntervalMs?: number;
  /** Integration time-outs of the HTTP front (API Gateway's 29 s by default); tests pass short ones. */
  integrationTimeouts?: Partial<IntegrationTimeouts>;
  /**
   * D20 long-poll budget in seconds, 1..60, as a deployment's context `longPollSeconds` sets it:
   * default `LOCAL_LONG_POLL_SECONDS`, else cdk.json's value (25), so a long poll is held and
   * announced locally as the default deployment holds it.
   */
  longPollSeconds?: number;
  /** Held long polls per long-poll route, and per route and organization (shared/long-poll-slots.ts): default as deployed. */
  longPollMaxWaits?: { total: number; perOrg: number };
  /** Called when DynamoDB Local or the SQS emulator exits on its own (`npm start` then exits non-zero). */
  onChildExit?: (what: string, code: number | null) => void;
  /**
   * Concurrent consumer invocations per queue, as Lambda's event source mapping runs them: one
   * number for every queue, or per queue name. Default: the queue's `maxConcurrency` in the wiring,
   * else the machine's cores.
   */
  consumerConcurrency?: number | Record<string, number>;
  /**
   * Every queue batch handed to two consumer invocations at once, as SQS may deliver a message to
   * two receivers (local/sqs-poller.ts): tests that prove the consumers idempotent. Off by default.
   */
  duplicateDeliveries?: boolean;
  /**
   * Every queue batch handed over shuffled, and some messages held back behind later ones, as a
   * standard queue's best-effort ordering may deliver them (local/sqs-poller.ts): tests that prove the
   * consumers assume no order. Off by default; an object sets the random source (seededRandom).
   */
  outOfOrderDeliveries?: boolean | OutOfOrderOptions;
  /**
   * Worker threads for the image models and pixel analysis (local/model-pool.ts), so the consumers'
   * models use the machine's cores as separate Lambda invocations would; 0 runs them on this
   * process's main thread. Default: LOCAL_MODEL_WORKERS, else the consumer concurrency (a number
   * for every queue), else the machine's cores.
   */
  modelWorkers?: number;
}

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
  /** The model worker threads (null: the models run on the main thread). */
  modelWorkers: ModelWorkerPool | null;
  /** The stream rules the table stream's poller routes to (none when streams are off). */
  streamRules: readonly StreamRuleDef[];
  schedules: ScheduleDef[];
  stop(): Promise<void>;
}

function modelWorkerCount(opts: RuntimeOptions): number {
  const env = process.env.LOCAL_MODEL_WORKERS;
  const n = opts.modelWorkers ?? (env ? Number(env) : typeof opts.consumerConcurrency === 'number' ? opts.consumerConcurrency : defaultConsumerConcurrency());
  if (!(Number.isInteger(n) && n >= 0)) throw new Error(`model workers must be a whole number ≥ 0 (LOCAL_MODEL_WORKERS: "${env}")`);
  return n;
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

  const stops: (() => Promise<unknown> | void)[] = [];
  /**
   * An emulator child that dies leaves the runtime unable to keep its promises (queued work, the
   * table): say so loudly and let the caller stop (`npm start` exits non-zero; the next start
   * finds the run marker and re-enqueues unfinished work from the table).
   */
  const childDied = (what: string, code: number | null) => {
    log.error(`${what} exited unexpectedly (code ${code ?? 'none'}); the runtime cannot go on without it`);
    opts.onChildExit?.(what, code);
  };
  const stopAll = async () => {
    // In reverse order of start: HTTP first, DynamoDB Local last.
    for (let stop = stops.pop(); stop; stop = stops.pop()) {
      try {
        await stop();
      } catch (err) {
        log.error('stop failed', err);
      }
    }
  };

  try {
    let dynamo: DynamoDbLocal | null = null;
    if (!opts.dynamoEndpoint) {
      dynamo = await startDynamoDbLocal({ dbPath: dataDir ? join(dataDir, 'dynamodb') : undefined });
      stops.push(() => dynamo!.stop());
      dynamo.onUnexpectedExit((code) => childDied('DynamoDB Local', code));
    }
    const dynamoEndpoint = opts.dynamoEndpoint ?? dynamo!.endpoint;

    const sqsEmulator = await startSqsEmulator({ host });
    stops.push(() => sqsEmulator.stop());
    sqsEmulator.onUnexpectedExit((code) => childDied('the SQS emulator (fauxqs)', code));
    const sqs = localSqsClient(sqsEmulator.endpoint);
    stops.push(() => sqs.destroy());
    const sandboxDelay = opts.sandboxDelaySeconds ?? (process.env.SANDBOX_DELAY_SECONDS ? Number(process.env.SANDBOX_DELAY_SECONDS) : undefined);
    const queues = await createQueues(sqs, QUEUES, sandboxDelay !== undefined ? { sandbox: sandboxDelay } : {});
    let uncleanBefore = false;
    let killedRunStartedAt: string | undefined;
    /** A reconciler failed: the marker stays through a clean stop, so the next start runs them again. */
    let reconcileFailed = false;
    if (dataDir) {
      // fauxqs keeps messages in memory: carry them across restarts (local/sqs-snapshot.ts).
      const snapshotFile = join(dataDir, 'sqs-snapshot.json');
      const urls = new Map<string, string>();
      for (const q of queues.values()) urls.set(q.def.name, q.url).set(`${q.def.name}-dlq`, q.dlqUrl);
      const snapshot = readSnapshot(snapshotFile);
      if (snapshot) {
        const n = await restoreSnapshot(sqs, sqsEmulator.endpoint, (name) => urls.get(name), snapshot, (name, count) =>
          log.warn(`sqs: ${count} saved messages of queue ${name}, which no longer exists, left in ${snapshotFile}.unrestored`),
        );
        const unknown = Object.keys(snapshot.queues).filter((name) => !urls.has(name));
        if (unknown.length) writeSnapshot(`${snapshotFile}.unrestored`, { ...snapshot, queues: Object.fromEntries(unknown.map((k) => [k, snapshot.queues[k]!])) });
        removeSnapshot(snapshotFile);
        log.info(`sqs: restored ${n} queued messages saved at ${snapshot.takenAt}`);
      }
      // Held while running; removed last in a clean stop, once the queues are saved. Found at
      // start, it means the last run was killed: the reconcilers then re-enqueue unfinished work.
      const marker = runMarker(join(dataDir, 'runtime.running'));
      uncleanBefore = marker.uncleanBefore;
      killedRunStartedAt = marker.startedAt ?? undefined;
      let snapshotSaved = false;
      stops.push(() => {
        if (snapshotSaved && !reconcileFailed) marker.release();
      });
      // Runs after the pollers, stream pipes and scheduler have stopped (stops run in reverse).
      stops.push(async () => {
        const saved = await takeSnapshot(sqsEmulator.endpoint, [...urls.keys()]);
        const n = countMessages(saved);
        if (n) {
          writeSnapshot(snapshotFile, saved);
          log.info(`sqs: saved ${n} queued messages to ${snapshotFile}`);
        }
        snapshotSaved = true;
      });
    }
    const send = queueSender(sqs, queues);
    const router = createEventRouter({ bucketName, send, log });

    const s3Dir = dataDir ? join(dataDir, 's3') : mkdtempSync(join(tmpdir(), 'local-s3-'));
    if (!dataDir) stops.push(() => rmSync(s3Dir, { recursive: true, force: true }));
    // The upload-signing role's credentials (pre-signed upload URLs), issued by the STS emulator and
    // accepted by the S3 front until they expire, as STS's are by S3.
    const issued = new IssuedCredentials(dataDir ? join(dataDir, 'sts-credentials.json') : undefined);
    const uploadSignerRoleArn = `arn:aws:iam::${LOCAL_ACCOUNT_ID}:role/local-upload-signer`;
    const sts = await startStsEmulator({ host, region, account: LOCAL_ACCOUNT_ID, roleArn: uploadSignerRoleArn, credentials: S3_LOCAL_CREDENTIALS, issued });
    stops.push(() => sts.stop());
    const s3 = await startS3Emulator({
      directory: s3Dir,
      temporaryCredentials: issued,
      portFile: dataDir ? join(dataDir, 's3-port') : undefined, // pre-signed upload URLs outlive a restart
      bucket: bucketName,
      host,
      account: LOCAL_ACCOUNT_ID,
      region,
      onObjectCreated: (event) => {
        router.route(event).catch((err: Error) => log.error(`eventbridge: delivery failed: ${err.message}`));
      },
    });
    stops.push(() => s3.stop());

    // Bind the port first (PUBLIC_BASE_URL needs it); requests wait until the environment is set.
    let markReady!: () => void;
    const ready = new Promise<void>((r) => (markReady = r));
    const longPollSeconds = opts.longPollSeconds ?? deployedLongPollSeconds();
    const server = createHttpServer({
      log,
      ready,
      timeouts: { longPollMs: longPollTimeoutSeconds(longPollSeconds).fn * 1000, ...opts.integrationTimeouts },
    });
    // The local payment provider's hosted checkout page (D32).
    stops.push(registerLocalPage(localCheckoutPage));
    // D60: signed download URLs under <url>/cdn, checked as CloudFront checks them.
    stops.push(registerLocalPage(localCdnPage));
    await new Promise<void>((ok, fail) => {
      server.once('error', fail);
      server.listen(opts.port ?? 3000, host, () => ok());
    });
    stops.push(
      () =>
        new Promise<void>((r) => {
          server.close(() => r());
          server.closeAllConnections();
        }),
    );
    const url = `http://${host}:${(server.address() as AddressInfo).port}`;

    // Secrets live in the data folder (D63), generated once and kept across restarts.
    const secrets = ensureLocalSecrets(dataDir, opts.cursorSecret ? { cursor: opts.cursorSecret } : {});
    // The handlers read these through shared/config; set them before any handler module loads.
    const env: Record<string, string> = {
      RUNTIME: 'local',
      AWS_REGION: region,
      AWS_ACCESS_KEY_ID: S3_LOCAL_CREDENTIALS.accessKeyId,
      AWS_SECRET_ACCESS_KEY: S3_LOCAL_CREDENTIALS.secretAccessKey,
      TABLE_NAME: tableName,
      BUCKET_NAME: bucketName,
      DYNAMODB_ENDPOINT: dynamoEndpoint,
      // Our DynamoDB Local on disk: make committed transactions survive a SIGKILL (shared/db/client).
      LOCAL_DYNAMODB_DURABLE_TRANSACTIONS: dynamo && dataDir ? '1' : '0',
      S3_ENDPOINT: s3.endpoint,
      SQS_ENDPOINT: sqsEmulator.endpoint,
      STS_ENDPOINT: sts.endpoint,
      UPLOAD_SIGNER_ROLE_ARN: uploadSignerRoleArn,
      LOCAL_SECRETS_FILE: secrets.file,
      PUBLIC_BASE_URL: opts.publicBaseUrl ?? url,
      // D60: download URLs are signed for the local CDN (local/cdn.ts) with the persisted key.
      CDN_BASE_URL: `${(opts.publicBaseUrl ?? url).replace(/\/+$/, '')}/cdn`,
      CDN_KEY_PAIR_ID: secrets.values['cdn-key-pair-id']!,
      // What the stack gives the long-poll routes (lib/domain-stack.ts): the wait is clamped to it.
      LONG_POLL_MAX_SECONDS: String(longPollSeconds),
      LONG_POLL_MAX_WAITS: String(opts.longPollMaxWaits?.total ?? deployedLongPollMaxWaits()),
      LONG_POLL_MAX_WAITS_PER_ORG: String(opts.longPollMaxWaits?.perOrg ?? deployedLongPollMaxWaitsPerOrg()),
    };
    for (const q of queues.values()) env[queueUrlEnvName(q.def.name)] = q.url;
    if (sandboxDelay !== undefined) env.SANDBOX_DELAY_SECONDS = String(sandboxDelay);
    delete process.env.AWS_PROFILE; // the local process must never reach a real account
    delete process.env.AWS_SESSION_TOKEN;
    Object.assign(process.env, env);
    resetConfig();
    resetSecrets();
    resetSealer();
    resetClients();
    resetS3(); // a client of an earlier runtime in this process would talk to its (stopped) S3

    const ddb = localDynamoClient(dynamoEndpoint);
    stops.push(() => ddb.destroy());
    await ensureTable(ddb, tableName);

    if (uncleanBefore) {
      // Before the pollers and stream pipes start: what they would redo is claimed in the table.
      log.warn('the last run did not stop cleanly (killed?): re-enqueueing unfinished work');
      for (const r of UNFINISHED_WORK) registerReconciler(r);
      reconcileFailed = !(await runReconcilers({ send, route: (event) => router.route(event), bucketName, account: LOCAL_ACCOUNT_ID, region, log, killedRunStartedAt }));
    } else if (dataDir) {
      // Even after a clean stop: an event committed by a batch that finished while the runtime was
      // stopping (after the stream pipes had stopped) may never have been fanned out, and the stream
      // position does not survive a restart of DynamoDB Local. Fan-outs claim their deliveries, so
      // an event fanned out twice is still delivered once per endpoint (D64).
      registerReconciler(webhooksReconciler);
      reconcileFailed = !(await runReconcilers({ send, route: (event) => router.route(event), bucketName, account: LOCAL_ACCOUNT_ID, region, log }));
    }

    // Before the pollers: stops run in reverse, so the pool stops after their last batch.
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

    let scheduler: Scheduler | null = null;
    if (opts.enableScheduler ?? true) {
      scheduler = startScheduler({ log });
      stops.push(() => scheduler!.stop());
    }

    // Stops run in reverse: first of all, the API takes no new requests (those running finish), so
    // no new work reaches the queues while the pollers finish their batches and the queues are saved.
    stops.push(() => {
      server.close();
      server.closeIdleConnections();
    });

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
