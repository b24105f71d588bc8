/**
 * Event wiring: the one definition of every queue, EventBridge rule, stream pipe and schedule.
 *
 * The CDK stack builds SQS queues (each with a dead-letter queue and a depth alarm), EventBridge
 * rules, EventBridge Pipes and schedules from it; the local runtime builds the same queues in the
 * SQS emulator, routes S3 events through the same rule patterns (see `local/eventbridge`), polls
 * the DynamoDB Local stream through the same pipe filters and fires the same schedules. What runs
 * locally is what deploys.
 */

/** A subset of the EventBridge event-pattern language, enough for our rules (exact, prefix). */
export type PatternValue = string | number | boolean | { prefix: string } | { 'anything-but': string[] };
export type EventPattern = { [field: string]: PatternValue[] | EventPattern };

export interface QueueDef {
  /** Logical name; the stack derives resource names from it, the local runtime uses it as queue name. */
  name: string;
  /** Consumer handler module, relative to the project root; it exports `handler` (SQS batch). */
  consumer: string;
  visibilityTimeoutSeconds: number;
  /** Receives before a message moves to the queue's dead-letter queue. */
  maxReceiveCount: number;
  batchSize: number;
  /** Queue-level delivery delay (seconds). */
  deliveryDelaySeconds?: number;
  /** Consumer Lambda timeout; must stay below the visibility timeout. */
  consumerTimeoutSeconds: number;
  consumerMemoryMb: number;
  /** Dead-letter depth at or above which the alarm fires. */
  dlqAlarmThreshold: number;
  access: { table: 'read' | 'write'; bucket?: 'read' | 'read-write'; bedrock?: boolean; sendTo?: string[] };
}

export interface RuleDef {
  name: string;
  description: string;
  /** Where events come from: the S3 bucket's EventBridge notifications (default bus). */
  source: 'bucket';
  pattern: EventPattern;
  targets: string[]; // queue names
}

/** DynamoDB stream → queue, filtered (EventBridge Pipes in the stack, a stream poller locally). */
export interface PipeDef {
  name: string;
  description: string;
  /** Filter on the stream record, in EventBridge Pipes filter syntax on `dynamodb.NewImage`. */
  filter: EventPattern;
  target: string; // queue name
}

export interface ScheduleDef {
  name: string;
  description: string;
  /** Minutes between runs. */
  everyMinutes: number;
  handler: string;
  timeoutSeconds: number;
  access: { table: 'read' | 'write'; sendTo?: string[] };
}

/** S3 key prefixes (one place): uploads start the pipeline, keyframes do not. */
export const BUCKET_PREFIXES = {
  uploads: 'uploads/',
  keyframes: 'keyframes/',
} as const;

export const QUEUES: readonly QueueDef[] = [
  {
    name: 'scoring',
    consumer: 'functions/pipeline/score.ts',
    visibilityTimeoutSeconds: 180,
    maxReceiveCount: 5,
    batchSize: 5,
    consumerTimeoutSeconds: 120,
    consumerMemoryMb: 1024,
    dlqAlarmThreshold: 1,
    // read-write: a pre-signed upload refused on its landed bytes is deleted (D25).
    access: { table: 'write', bucket: 'read-write', bedrock: true },
  },
  {
    name: 'annotation',
    consumer: 'functions/pipeline/annotate.ts',
    visibilityTimeoutSeconds: 300,
    maxReceiveCount: 5,
    batchSize: 2,
    consumerTimeoutSeconds: 240,
    consumerMemoryMb: 2048,
    dlqAlarmThreshold: 1,
    access: { table: 'write', bucket: 'read-write', bedrock: true },
  },
  {
    name: 'webhooks',
    consumer: 'functions/webhooks/dispatch.ts',
    // D37: 15 s receiver timeout per attempt; a batch of 10 sends in parallel.
    visibilityTimeoutSeconds: 60,
    maxReceiveCount: 10,
    batchSize: 10,
    consumerTimeoutSeconds: 30,
    consumerMemoryMb: 512,
    dlqAlarmThreshold: 1,
    access: { table: 'write', sendTo: ['webhooks'] },
  },
  {
    name: 'sandbox',
    consumer: 'functions/sandbox/simulate.ts',
    visibilityTimeoutSeconds: 120,
    maxReceiveCount: 5,
    batchSize: 1,
    // D40: the simulated worker arrives about SANDBOX_DELAY_SECONDS after creation.
    deliveryDelaySeconds: 15,
    consumerTimeoutSeconds: 60,
    consumerMemoryMb: 512,
    dlqAlarmThreshold: 1,
    access: { table: 'write', bucket: 'read-write', sendTo: ['sandbox'] },
  },
];

export const RULES: readonly RuleDef[] = [
  {
    name: 'upload-created',
    description: 'S3 ObjectCreated under uploads/ fans out to scoring and annotation in parallel (D54)',
    source: 'bucket',
    pattern: {
      source: ['aws.s3'],
      'detail-type': ['Object Created'],
      detail: { object: { key: [{ prefix: BUCKET_PREFIXES.uploads }] } },
    },
    targets: ['scoring', 'annotation'],
  },
];

export const PIPES: readonly PipeDef[] = [
  {
    name: 'outbox-to-webhooks',
    description: 'Every event written by the outbox (D35) goes to the webhook dispatcher',
    filter: { eventName: ['INSERT'], dynamodb: { NewImage: { entity: { S: ['event'] } } } },
    target: 'webhooks',
  },
  {
    name: 'sandbox-jobs',
    description: 'Test-environment job.created events start the simulated worker (D40)',
    filter: {
      eventName: ['INSERT'],
      dynamodb: {
        NewImage: {
          entity: { S: ['event'] },
          type: { S: ['job.created'] },
          environment: { S: ['test'] },
        },
      },
    },
    target: 'sandbox',
  },
];

export const SCHEDULES: readonly ScheduleDef[] = [
  {
    name: 'reservation-sweep',
    description: 'Frees expired slot reservations (D23) without any request',
    everyMinutes: 1,
    handler: 'functions/scheduled/reservation-sweep.ts',
    timeoutSeconds: 55,
    access: { table: 'write' },
  },
  {
    name: 'credit-expiry-sweep',
    description: 'Expires free-tier and bonus lots, warns 30 days ahead (D33)',
    everyMinutes: 60,
    handler: 'functions/scheduled/credit-expiry-sweep.ts',
    timeoutSeconds: 300,
    access: { table: 'write' },
  },
];

export function queueByName(name: string): QueueDef {
  const q = QUEUES.find((x) => x.name === name);
  if (!q) throw new Error(`unknown queue ${name}`);
  return q;
}

/**
 * Evaluate an event pattern against an event (exact values, `prefix`, `anything-but`; nested
 * objects). Shared by the local EventBridge router and the local stream pipes, and unit-tested
 * against the patterns above so both sides agree.
 */
export function matchesPattern(pattern: EventPattern, event: unknown): boolean {
  if (event === null || typeof event !== 'object') return false;
  const obj = event as Record<string, unknown>;
  for (const [field, expected] of Object.entries(pattern)) {
    const actual = obj[field];
    if (Array.isArray(expected)) {
      const values = Array.isArray(actual) ? actual : [actual];
      const ok = values.some((v) =>
        expected.some((e) => {
          if (e !== null && typeof e === 'object') {
            if ('prefix' in e) return typeof v === 'string' && v.startsWith(e.prefix);
            if ('anything-but' in e) return v !== undefined && !e['anything-but'].includes(String(v));
            return false;
          }
          return v === e;
        }),
      );
      if (!ok) return false;
    } else {
      if (!matchesPattern(expected, actual)) return false;
    }
  }
  return true;
}
