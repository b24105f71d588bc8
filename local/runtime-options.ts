/**
 * The local runtime's options (startRuntime, local/runtime.ts), and what startRuntime settles from
 * them before it starts anything: the context each of its steps (local/runtime-*.ts) is handed.
 */
import type { IntegrationTimeouts } from './http';
import type { WafRateLimits } from './waf-rate';
import type { StageThrottle } from './stage-throttle';
import type { Log, LogLevel } from './log';
import type { OutOfOrderOptions } from './sqs-records';
import type { Stop } from './runtime-stops';

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
  /**
   * The web ACL's per-IP rate rules (local/waf-rate.ts): default as deployed (`LOCAL_WAF_RATE_PER_5MIN`
   * and `LOCAL_WAF_SIGNUP_RATE_PER_5MIN`, else cdk.json's context, else 6000 and 20 in five minutes).
   * false turns them off: the test suites and benchmarks, which send everything from one address.
   */
  wafRateLimits?: WafRateLimits | false;
  /**
   * The stage's method throttling (local/stage-throttle.ts): default as deployed (200 requests a
   * second per method, bursts of 400). false turns it off: the test suites and benchmarks, which
   * send one route's requests faster than that.
   */
  stageThrottle?: StageThrottle | false;
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
   * DynamoDB's index lag: a Query or Scan of a global secondary index leaves out every item written
   * less than this many milliseconds before (local/index-lag.ts), as an index that has not yet
   * taken in the latest writes: tests that prove no flow relies on an index being current. Off (0)
   * by default. One setting per process: the last runtime started sets it, and stopping one turns
   * it off.
   */
  indexLagMs?: number;
  /**
   * Worker threads for the image models and pixel analysis (local/model-pool.ts), so the consumers'
   * models use the machine's cores as separate Lambda invocations would; 0 runs them on this
   * process's main thread. Default: LOCAL_MODEL_WORKERS, else the consumer concurrency (a number
   * for every queue), else the machine's cores.
   */
  modelWorkers?: number;
}

/** What startRuntime settles from its options before starting anything, and hands to each step. */
export interface StartContext {
  opts: RuntimeOptions;
  log: Log;
  host: string;
  /** Where everything persists; null: nothing does (`inMemory`). */
  dataDir: string | null;
  tableName: string;
  bucketName: string;
  region: string;
  /** Each step pushes the stops of what it starts, as it starts it (local/runtime-stops.ts). */
  stops: Stop[];
}
