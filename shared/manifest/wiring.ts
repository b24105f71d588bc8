/**
 * Event wiring: the one definition of every queue, EventBridge rule, stream pipe and schedule.
 *
 * The CDK stack builds SQS queues (each with a dead-letter queue and a depth alarm), EventBridge
 * rules, the table stream's pipe with its bus and rules, and schedules from it; the local runtime
 * builds the same queues in the SQS emulator, routes S3 events through the same rule patterns (see
 * `local/eventbridge`), polls the DynamoDB Local stream through the same pipe filter and stream
 * rules and fires the same schedules. What runs locally is what deploys.
 */

import type { BucketAccess, KeyAccess } from './access';
import { STREAM_EVENT_DETAIL_TYPE, STREAM_EVENT_SOURCE } from './stream-event';
import { WEBHOOKS_CONSUMER_TIMEOUT_SECONDS } from './timeouts';

export { streamRecordOf } from './stream-event';

/** A subset of the EventBridge event-pattern language, enough for our rules (exact, prefix). */
export type PatternValue = string | number | boolean | { prefix: string } | { 'anything-but': string[] };
export type EventPattern = { [field: string]: PatternValue[] | EventPattern };

/**
 * What a consumer loads at run time from outside its esbuild bundle. esbuild cannot bundle a
 * native addon (sharp's `.node` binary and libvips), nor files a package reads by path
 * (`shared/media/native.ts`: model weights, WASM, worker scripts), nor our own data files read by
 * path, nor an executable.
 *
 * The stack (lib/constructs/native.ts, docs/deploying.md) installs `packages` into the function's
 * `node_modules` for linux-arm64 (glibc) at the versions of package-lock.json, copies `files` into
 * the function, and attaches the ffmpeg layer (context `ffmpegLayerArn`) when `ffmpeg` is set,
 * with FFMPEG_PATH/FFPROBE_PATH. The local runtime ignores this field: there the project's own
 * node_modules, files and the `ffmpeg` on PATH serve every consumer.
 */
export interface NativeDeps {
  /**
   * npm packages resolved from node_modules at run time, each a dependency in package.json: a
   * package imported with `import('<name>')` that must stay outside the bundle (sharp), or that
   * only some invocations need and that is large enough to weigh on every cold start (the audio
   * and EXIF decoders, loaded by the first file of their kind), or one located by `findPackageDir` / `nativeRequire` / `packageFile`. Packages they depend on come
   * with them.
   */
  packages: string[];
  /** Runs ffprobe / ffmpeg (`shared/media/ffmpeg.ts`): video and audio probing, loudness, keyframes. */
  ffmpeg?: boolean;
  /** Project files or directories read by path at run time, shipped inside the function. */
  files?: ShippedFile[];
}

export interface ShippedFile {
  /** File or directory of the project, relative to its root. */
  from: string;
  /** Where it lands in the function, relative to the code root (/var/task in Lambda). */
  to: string;
  /** Environment variable that gets its absolute path there (how the code finds it). */
  env: string;
}

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
  /** Consumer Lambda timeout; the visibility timeout is at least 6 × this (AWS guidance). */
  consumerTimeoutSeconds: number;
  consumerMemoryMb: number;
  /**
   * The consumer's /tmp (Lambda ephemeral storage, 512..10240 MB; absent: Lambda's 512). ffprobe
   * and ffmpeg read an object from a file there, one copy per tool running on it; the objects held
   * at once are bounded by shared/work/object-budget.ts (a quarter of the memory).
   */
  ephemeralStorageMb?: number;
  /**
   * Most consumer invocations at once (the event source mapping's maximum concurrency). Absent:
   * deployed, Lambda scales as it likes; locally, one per core (the consumer is CPU-bound). Set it
   * for a consumer that mostly waits on the network, so that slow peers hold a slot each, not all.
   */
  maxConcurrency?: number;
  /** Dead-letter depth at or above which the alarm fires. */
  dlqAlarmThreshold: number;
  /**
   * Lambda's recursive loop detection (https://docs.aws.amazon.com/lambda/latest/dg/invocation-recursion.html):
   * a function invoked more than 16 times by one chain of events that goes through SQS (the
   * function sending the message that invokes it again, traced by the SDK's X-Ray lineage header)
   * is stopped by default, and the message sent to the dead-letter queue. A consumer that re-sends
   * to its own queue by design, with the loop bounded in its code, says so here ('allow'): the
   * stack sets the function's RecursiveLoop to Allow, and the local runtime, which stops such
   * chains as Lambda does (local/lineage.ts), lets it go on. Absent: Terminate, Lambda's default.
   */
  recursiveLoop?: 'allow';
  /** The bucket modes are those of shared/manifest/access.ts, each as narrow as the consumer's work. */
  access: { table: 'read' | 'write'; bucket?: BucketAccess; bedrock?: boolean; sendTo?: string[] } & KeyAccess;
  /** Packages and executables the consumer needs beyond its bundle; absent: the bundle is enough. */
  native?: NativeDeps;
}

export interface RuleDef {
  name: string;
  description: string;
  /**
   * Where events come from (default bus): `bucket`, the S3 bucket's EventBridge notifications
   * (the stack restricts the pattern to the media bucket); `transcribe`, Amazon Transcribe's job
   * state changes (D65; the pattern restricts job names to ours). The local runtime routes only
   * `bucket` events: nothing runs Transcribe there.
   */
  source: 'bucket' | 'transcribe';
  pattern: EventPattern;
  targets: string[]; // queue names
}

/**
 * DynamoDB stream record → queue, filtered. The table's stream has one reader (AWS advises at most
 * two per shard, or reads are throttled): the `TABLE_STREAM` pipe puts each record it keeps on a
 * custom event bus, and one EventBridge rule per definition sends the matching records to its
 * queue, the record itself as the message body. Locally a stream poller does the same.
 */
export interface StreamRuleDef {
  name: string;
  description: string;
  /**
   * Filter on the stream record, in EventBridge pattern syntax (`eventName`, `dynamodb.NewImage`).
   * Its `eventName` and `dynamodb.NewImage.entity` must be among the pipe's (`TABLE_STREAM`).
   */
  filter: EventPattern;
  target: string; // queue name
}

export interface ScheduleDef {
  name: string;
  description: string;
  /** Minutes between runs. */
  everyMinutes: number;
  handler: string;
  /** Below the period, so a tick never finds the previous tick's run still going. */
  timeoutSeconds: number;
  /**
   * A schedule invokes its function asynchronously: a run that fails is run again by Lambda this
   * many times, one minute and then two minutes later (overlapping the next ticks), as the stack
   * configures it (lib/domain-stack.ts) and the local scheduler does.
   */
  retriesOnFailure: 0 | 1 | 2;
  access: { table: 'read' | 'write'; bucket?: BucketAccess; sendTo?: string[] } & KeyAccess;
}

/** S3 key prefixes (one place): uploads start the pipeline, keyframes do not. */
export const BUCKET_PREFIXES = {
  uploads: 'uploads/',
  keyframes: 'keyframes/',
  /** Dataset exports (D73): written by the `exports` consumer, never start the pipeline. */
  exports: 'exports/',
  /** Amazon Transcribe output documents (D65), `transcripts/<job name>.json` */
  transcripts: 'transcripts/',
} as const;

/** Transcription job names start with this (shared/speech/transcribe.ts `jobNameFor`). */
export const TRANSCRIBE_JOB_PREFIX = 'media-';

export const QUEUES: readonly QueueDef[] = [
  {
    name: 'scoring',
    consumer: 'functions/pipeline/score.ts',
    // At least 6 × the consumer timeout (AWS guidance for Lambda event sources, checked by the stack).
    visibilityTimeoutSeconds: 720,
    // D66: failed messages come back with the consumer's backoff (30 s doubling, 15 min cap,
    // shared/work/consumer.ts), so 8 receives ride out ~45 minutes of provider outage before the
    // message waits in the DLQ for a redrive (docs/scoring.md).
    maxReceiveCount: 8,
    batchSize: 5,
    consumerTimeoutSeconds: 120,
    consumerMemoryMb: 1024,
    // 256 MB of objects at once (the budget), each probed or framed from a copy in /tmp.
    ephemeralStorageMb: 1024,
    dlqAlarmThreshold: 1,
    // score: reads the upload's bytes, tags a verdict, deletes a pre-signed upload refused on its
    // landed bytes (D25), all under uploads/ only.
    // transcribe: audio and video sound tracks are sent to Amazon Transcribe before scoring (D65).
    // sendTo scoring: a transcription job started again after a provider failure gets a fresh
    // scoring message to wait for it (shared/work/transcript-gate.ts).
    access: { table: 'write', bucket: 'score', bedrock: true, transcribe: true, sendTo: ['scoring'] },
    // measure(): sharp for images, ffprobe for video (without it a video's scoring step fails and is
    // retried, never decided: docs/deploying.md); the local scorer's middle frame and loudness need ffmpeg.
    // music-metadata (audio) and exifr (image EXIF) are read by path too, loaded by the first file
    // of their kind: a consumer's cold start does not parse the decoder of every kind.
    native: {
      packages: ['sharp', 'music-metadata', 'exifr'],
      ffmpeg: true,
      // worker_region (D30): offline reverse geocoding, shared/media/region.ts.
      files: [{ from: 'shared/media/data/admin1.min.json.gz', to: 'data/admin1.min.json.gz', env: 'WORKER_REGION_GEOJSON' }],
    },
  },
  {
    name: 'annotation',
    consumer: 'functions/pipeline/annotate.ts',
    visibilityTimeoutSeconds: 1440,
    maxReceiveCount: 5,
    batchSize: 2,
    consumerTimeoutSeconds: 240,
    consumerMemoryMb: 2048,
    // 512 MB of objects at once (the budget); a video's loudness and keyframes read two copies at once.
    ephemeralStorageMb: 2048,
    dlqAlarmThreshold: 1,
    // annotate: reads the approved upload's bytes, writes its keyframes; nothing else.
    access: { table: 'write', bucket: 'annotate', bedrock: true },
    // Image annotation (shared/media/annotation/models.ts): faces and objects with human on tfjs
    // + WASM, NSFW with nsfwjs, OCR with tesseract.js, all loaded by path; sharp for pixels;
    // ffmpeg for audio loudness/noise, video probing and keyframes.
    native: {
      packages: [
        'sharp',
        'music-metadata',
        'exifr',
        '@vladmandic/human',
        '@tensorflow/tfjs',
        '@tensorflow/tfjs-backend-wasm',
        'nsfwjs',
        'tesseract.js',
        '@tesseract.js-data/eng',
      ],
      ffmpeg: true,
    },
  },
  {
    // D65: Amazon Transcribe finished (or failed) a job; the transcript goes into the file and
    // scoring resumes (sendTo scoring). Bedrock derives topics, keywords and emotion tone.
    name: 'transcription',
    consumer: 'functions/pipeline/transcribed.ts',
    // At least 6 × the consumer timeout (checked by the stack); the consumer outlasts a Bedrock
    // call's 60 s time-out, so a slow model fails the message (backoff) rather than the Lambda.
    visibilityTimeoutSeconds: 540,
    maxReceiveCount: 8,
    batchSize: 5,
    consumerTimeoutSeconds: 90,
    consumerMemoryMb: 512,
    dlqAlarmThreshold: 1,
    access: { table: 'write', bucket: 'transcripts', bedrock: true, sendTo: ['scoring'] },
  },
  {
    name: 'webhooks',
    consumer: 'functions/webhooks/dispatch.ts',
    // D37: 15 s receiver timeout per attempt; a batch of 10 sends in parallel.
    visibilityTimeoutSeconds: 180,
    maxReceiveCount: 10,
    batchSize: 10,
    consumerTimeoutSeconds: WEBHOOKS_CONSUMER_TIMEOUT_SECONDS,
    consumerMemoryMb: 512,
    // Waiting on receivers, not the CPU: a hanging receiver holds one invocation for up to 15 s,
    // the others go on delivering (issue 11.6).
    maxConcurrency: 20,
    dlqAlarmThreshold: 1,
    // A retry due later than SQS's 900 s delay is re-sent to this queue every 900 s until due (a
    // 10 h retry: 40 sends), bounded by the retry schedule (D37): a designed loop.
    recursiveLoop: 'allow',
    access: { table: 'write', sendTo: ['webhooks'], kms: { 'endpoint-secret': 'decrypt' } }, // opens endpoint secrets to sign (D37, D63)
  },
  {
    name: 'sandbox',
    consumer: 'functions/sandbox/simulate.ts',
    visibilityTimeoutSeconds: 720,
    maxReceiveCount: 5,
    batchSize: 1,
    // D40: the simulated worker arrives about SANDBOX_DELAY_SECONDS after creation.
    deliveryDelaySeconds: 15,
    // A sample derived to meet the job's limits (shared/sandbox/samples.ts: a video looped to a
    // long minimum duration or scaled up) takes ffmpeg about 10 s and up to about 1 GB of memory,
    // and its copies are uploaded at once; the files are written in /tmp while ffmpeg works.
    consumerTimeoutSeconds: 120,
    consumerMemoryMb: 2048,
    ephemeralStorageMb: 2048,
    dlqAlarmThreshold: 1,
    // Each tick of a simulated worker sends the next to this queue (D40), bounded by the job's
    // status and 3 × files_needed ticks: a designed loop of far more than 16 invocations.
    recursiveLoop: 'allow',
    // write: the simulated worker's uploads go through the upload code (put and tag under uploads/).
    access: { table: 'write', bucket: 'write', sendTo: ['sandbox'] },
    // The simulated worker uploads the sample media (shared/sandbox/samples.ts), each made unique
    // with sharp (shared/sandbox/unique-bytes.ts).
    // ffmpeg: a sample derived to meet the job's duration or size limits, measured as the pipeline
    // measures it (measure(): music-metadata and exifr are installed beside the bundle and loaded by
    // the first derived file of their kind, as in the scoring consumer, not parsed at every cold start).
    native: { packages: ['sharp', 'music-metadata', 'exifr'], ffmpeg: true, files: [{ from: 'samples', to: 'samples', env: 'SANDBOX_SAMPLES_DIR' }] },
  },
  {
    // D73: builds one dataset export per message (the export item's INSERT record, which the
    // exports-requested pipe brings from the table stream), streaming
    // the job's Files to S3 as a multipart upload in bounded memory. A failure the consumer sees
    // marks the export failed (export.failed) at once; the DLQ keeps what even that could not record.
    name: 'exports',
    consumer: 'functions/pipeline/export.ts',
    // 6 × the consumer time-out (AWS guidance); a run that died is retried after an hour.
    visibilityTimeoutSeconds: 3600,
    // At least 5 (AWS guidance for a queue feeding Lambda): an invocation Lambda throttles returns
    // the message unrun after its visibility time-out, and still counts as a receive.
    maxReceiveCount: 5,
    batchSize: 1,
    consumerTimeoutSeconds: 600,
    consumerMemoryMb: 1024,
    dlqAlarmThreshold: 1,
    // export: writes the export (multipart) under exports/ only; JSONL and COCO carry each File's
    // signed download URL, which needs no bucket access.
    access: { table: 'write', bucket: 'export', cdnSign: true },
  },
  {
    // D71: deletes the delivered objects (files and keyframes) of a submission whose Files an
    // override withdrew, from the `submission.overridden` event's INSERT record (pipe
    // `files-withdrawn`): the commit that withdraws the Files also queues the deletion, so it
    // happens even when the override's function stops right after its commit.
    name: 'withdrawals',
    consumer: 'functions/pipeline/withdraw.ts',
    visibilityTimeoutSeconds: 180,
    maxReceiveCount: 8,
    batchSize: 10,
    consumerTimeoutSeconds: 30,
    consumerMemoryMb: 256,
    dlqAlarmThreshold: 1,
    // Reads the submission, marks the deletion done; deletes objects, nothing else on the bucket.
    access: { table: 'write', bucket: 'delete' },
  },
  {
    // D34: the auto top-up of a crossing of the low-balance threshold, from the
    // `credits.low_balance` event's INSERT record (pipe `auto-top-up`): the commit that crossed
    // the threshold queues it, and the request or sweep that crossed it does not wait for the card.
    name: 'top-ups',
    consumer: 'functions/billing/auto-top-up.ts',
    // 6 × the consumer time-out; the payment processor answers an off-session charge in seconds.
    visibilityTimeoutSeconds: 360,
    maxReceiveCount: 8,
    batchSize: 1,
    consumerTimeoutSeconds: 60,
    consumerMemoryMb: 512,
    dlqAlarmThreshold: 1,
    access: { table: 'write', secrets: ['stripe'] },
  },
  {
    // Spec (job cancel: "pending submissions rejected"): the `job.cancelled` event's INSERT record
    // (pipe `job-cancelled`) ends the job's submissions still in play, each in its own transaction
    // (shared/work/cancelled-job.ts): the commit that cancels also queues this.
    name: 'cancellations',
    consumer: 'functions/jobs/end-submissions.ts',
    visibilityTimeoutSeconds: 720,
    maxReceiveCount: 8,
    batchSize: 1,
    // A job with many submissions in play: one transaction each, a few hundred a minute at least.
    consumerTimeoutSeconds: 120,
    consumerMemoryMb: 512,
    dlqAlarmThreshold: 1,
    // Tags the bytes of the rejected uploads for the lifecycle rule, nothing else on the bucket.
    access: { table: 'write', bucket: 'tag' },
  },
];

export const RULES: readonly RuleDef[] = [
  {
    name: 'upload-created',
    description: 'S3 ObjectCreated under uploads/ fans out to scoring and annotation in parallel',
    source: 'bucket',
    pattern: {
      source: ['aws.s3'],
      'detail-type': ['Object Created'],
      detail: { object: { key: [{ prefix: BUCKET_PREFIXES.uploads }] } },
    },
    targets: ['scoring', 'annotation'],
  },
  {
    name: 'transcription-done',
    description: 'Amazon Transcribe job state changes (completed or failed) of our jobs resume scoring',
    source: 'transcribe',
    pattern: {
      source: ['aws.transcribe'],
      'detail-type': ['Transcribe Job State Change'],
      detail: {
        TranscriptionJobStatus: ['COMPLETED', 'FAILED'],
        TranscriptionJobName: [{ prefix: TRANSCRIBE_JOB_PREFIX }],
      },
    },
    targets: ['transcription'],
  },
];

export const STREAM_RULES: readonly StreamRuleDef[] = [
  {
    name: 'outbox-to-webhooks',
    description: 'Every event written by the outbox goes to the webhook dispatcher',
    filter: { eventName: ['INSERT'], dynamodb: { NewImage: { entity: { S: ['event'] } } } },
    target: 'webhooks',
  },
  {
    name: 'sandbox-jobs',
    description: 'Test-environment job.created events start the simulated worker',
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
  {
    name: 'exports-requested',
    description: 'A new export goes to the exports builder: the commit that accepts it also queues it',
    filter: { eventName: ['INSERT'], dynamodb: { NewImage: { entity: { S: ['export'] } } } },
    target: 'exports',
  },
  {
    name: 'files-withdrawn',
    description: 'An override that withdraws approved Files queues the deletion of their objects in the same commit',
    filter: {
      eventName: ['INSERT'],
      dynamodb: {
        NewImage: {
          entity: { S: ['event'] },
          type: { S: ['submission.overridden'] },
          envelope: { M: { data: { M: { decision: { S: ['reject'] } } } } },
        },
      },
    },
    target: 'withdrawals',
  },
  {
    name: 'auto-top-up',
    description: 'A crossing of the low-balance threshold with auto top-up on queues the top-up in the same commit',
    filter: {
      eventName: ['INSERT'],
      dynamodb: {
        NewImage: {
          entity: { S: ['event'] },
          type: { S: ['credits.low_balance'] },
          envelope: { M: { data: { M: { auto_top_up_enabled: { BOOL: [true] } } } } },
        },
      },
    },
    target: 'top-ups',
  },
  {
    name: 'job-cancelled',
    description: "A job's cancellation queues the rejection of its pending submissions in the same commit",
    filter: {
      eventName: ['INSERT'],
      dynamodb: { NewImage: { entity: { S: ['event'] }, type: { S: ['job.cancelled'] } } },
    },
    target: 'cancellations',
  },
  {
    name: 'fan-in-due',
    description: 'An upload completed after both stages had written queues its verdict in the same commit (no stage is left to take it)',
    filter: { eventName: ['INSERT'], dynamodb: { NewImage: { entity: { S: ['fan_in'] } } } },
    target: 'scoring',
  },
];

/**
 * The largest event an EventBridge bus takes (the entry: source, detail-type and detail, in bytes):
 * 1 MiB since January 2026 (256 KB before).
 */
export const EVENT_MAX_BYTES = 1024 * 1024;

/**
 * The one pipe reading the table's stream (EventBridge Pipes in the stack, the stream poller
 * locally). It keeps inserts of the entities some rule routes (an event the pipe would send to the
 * bus and no rule takes costs money and nothing else), and puts each as an event with this source
 * and detail type, the stream record as its `detail`, on the stream bus. A record whose event is
 * over `EVENT_MAX_BYTES` fails there, so it goes to the pipe's dead-letter queue.
 */
export const TABLE_STREAM = {
  name: 'table-stream',
  description: 'The one reader of the table stream: inserted events, exports and fan-in items go to the stream bus, where the stream rules route them',
  source: STREAM_EVENT_SOURCE,
  detailType: STREAM_EVENT_DETAIL_TYPE,
  filter: {
    eventName: ['INSERT'],
    dynamodb: { NewImage: { entity: { S: [...new Set(STREAM_RULES.flatMap((r) => streamRuleEntities(r)))] } } },
  } satisfies EventPattern,
} as const;

/** The entity values a stream rule's filter takes (`dynamodb.NewImage.entity.S`). */
function streamRuleEntities(rule: StreamRuleDef): string[] {
  const image = (rule.filter.dynamodb as EventPattern | undefined)?.NewImage as EventPattern | undefined;
  const entities = (image?.entity as EventPattern | undefined)?.S;
  if (!Array.isArray(entities) || !entities.every((e) => typeof e === 'string')) {
    throw new Error(`stream rule ${rule.name}: its filter must name the entities it takes (dynamodb.NewImage.entity.S)`);
  }
  return entities as string[];
}

/** The EventBridge event the table-stream pipe puts on the bus for `record`. */
export function streamEvent(record: unknown): { source: string; 'detail-type': string; detail: unknown } {
  return { source: TABLE_STREAM.source, 'detail-type': TABLE_STREAM.detailType, detail: record };
}

/** The pattern of a stream rule on the bus: the pipe's events whose record matches the rule's filter. */
export function streamRulePattern(rule: StreamRuleDef): EventPattern {
  return { source: [TABLE_STREAM.source], 'detail-type': [TABLE_STREAM.detailType], detail: rule.filter };
}

export const SCHEDULES: readonly ScheduleDef[] = [
  {
    name: 'reservation-sweep',
    description: 'Frees expired slot reservations without any request',
    everyMinutes: 1,
    handler: 'functions/scheduled/reservation-sweep.ts',
    timeoutSeconds: 55,
    // The next tick, a minute later, is its retry.
    retriesOnFailure: 0,
    // tag: bytes that landed in a reservation or retry window that ended are tagged for the lifecycle rule.
    access: { table: 'write', bucket: 'tag' },
  },
  {
    name: 'credit-expiry-sweep',
    description: 'Expires free-tier and bonus lots, warns 30 days ahead',
    everyMinutes: 60,
    handler: 'functions/scheduled/credit-expiry-sweep.ts',
    timeoutSeconds: 300,
    // Lambda's default: an hour is long to wait for the next tick.
    retriesOnFailure: 2,
    access: { table: 'write' }, // an expiry that crosses the threshold queues the auto top-up through its event (D34)
  },
];

/** Consumers bound by a provider quota (Bedrock, Transcribe) get this cap unless told otherwise. */
export const QUOTA_BOUND_DEFAULT_CONCURRENCY = 10;

/**
 * The event source mapping's maximum concurrency a deploy gives a queue's consumer without a
 * context value (lib/settings.ts): its `maxConcurrency`, else the quota cap for a consumer that
 * calls Bedrock or Transcribe, else none (Lambda scales as it likes). The local runtime never runs
 * more than this at once either.
 */
export function deployedConsumerCap(q: Pick<QueueDef, 'maxConcurrency' | 'access'>): number | undefined {
  if (q.maxConcurrency !== undefined) return Math.max(2, q.maxConcurrency);
  if (q.access.bedrock || q.access.transcribe) return QUOTA_BOUND_DEFAULT_CONCURRENCY;
  return undefined;
}

export function queueByName(name: string): QueueDef {
  const q = QUEUES.find((x) => x.name === name);
  if (!q) throw new Error(`unknown queue ${name}`);
  return q;
}

/**
 * Evaluate an event pattern against an event (exact values, `prefix`, `anything-but`; nested
 * objects). Shared by the local EventBridge router and the local stream poller, and unit-tested
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
