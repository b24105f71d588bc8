/**
 * The table stream's pipe, bus and stream rules locally: polls the table's DynamoDB stream
 * (DynamoDB Local implements the Streams API) as the one reader, keeps the records the pipe's
 * filter keeps (`TABLE_STREAM`), makes each the event the pipe would put on the stream bus, and
 * sends the stream record JSON to the queue of every stream rule whose pattern matches that event,
 * as the rule's `$.detail` target does. An event over EventBridge's size limit is refused as the
 * bus refuses it; a send that keeps failing is retried a bounded number of times. Either way the
 * record is dead-lettered (a log line and `<data dir>/stream-dead-letters.jsonl`), and the stream
 * goes on with the next record.
 */
import { appendFileSync, existsSync, readFileSync } from 'node:fs';
import { writeFileDurably } from './durable-write';
import {
  DescribeStreamCommand,
  DynamoDBStreamsClient,
  ExpiredIteratorException,
  GetRecordsCommand,
  GetShardIteratorCommand,
  ListStreamsCommand,
  TrimmedDataAccessException,
  type _Record,
  type ShardIteratorType,
} from '@aws-sdk/client-dynamodb-streams';
import type { DynamoDBRecord } from 'aws-lambda';
import { EVENT_MAX_BYTES, matchesPattern, STREAM_RULES, streamEvent, streamRulePattern, TABLE_STREAM, type StreamRuleDef } from '../shared/manifest/wiring';
import { localRegion } from './lambda';
import type { Log } from './log';
import type { QueueSender } from './sqs';

export function localStreamsClient(endpoint: string): DynamoDBStreamsClient {
  return new DynamoDBStreamsClient({ endpoint, region: localRegion(), credentials: { accessKeyId: 'local', secretAccessKey: 'local' } });
}

/** Binary attribute values arrive as bytes; the JSON record carries them base64-encoded, as AWS does. */
function jsonSafe(value: unknown): unknown {
  if (value instanceof Uint8Array) return Buffer.from(value).toString('base64');
  if (value instanceof Date) return Math.floor(value.getTime() / 1000);
  if (Array.isArray(value)) return value.map(jsonSafe);
  if (value && typeof value === 'object') {
    return Object.fromEntries(Object.entries(value).filter(([, v]) => v !== undefined).map(([k, v]) => [k, jsonSafe(v)]));
  }
  return value;
}

type Av = Record<string, unknown>;

/**
 * An empty map attribute comes back from DynamoDB Local's stream as `{}` rather than `{"M":{}}`
 * (AWS sends the latter, and `unmarshall` refuses the former): restore the AWS shape, recursively.
 */
function normaliseAttributeValue(v: unknown): unknown {
  if (!v || typeof v !== 'object' || Array.isArray(v)) return v;
  const av = v as Av;
  if (Object.keys(av).length === 0) return { M: {} };
  if (av.M && typeof av.M === 'object') return { M: normaliseImage(av.M as Av) };
  if (Array.isArray(av.L)) return { L: av.L.map(normaliseAttributeValue) };
  return av;
}

function normaliseImage(image: Av | undefined): Av | undefined {
  if (!image) return image;
  return Object.fromEntries(Object.entries(image).map(([k, v]) => [k, normaliseAttributeValue(v)]));
}

/**
 * A GetRecords record in the shape a pipe (or Lambda) delivers: `ApproximateCreationDateTime` in
 * epoch seconds, binary values base64, empty maps as `{"M":{}}`, plus `eventSourceARN`.
 */
export function toPipeRecord(record: _Record, streamArn: string): DynamoDBRecord & { eventSourceARN: string } {
  const r = jsonSafe(record) as DynamoDBRecord;
  const images = r.dynamodb as Record<string, Av | undefined> | undefined;
  if (images) {
    for (const part of ['Keys', 'NewImage', 'OldImage'] as const) {
      if (images[part]) images[part] = normaliseImage(images[part]);
    }
  }
  return { ...r, eventSourceARN: streamArn };
}

/** Where each shard was read up to: `npm start` keeps it on disk to resume after a restart. */
export interface CheckpointStore {
  load(): Record<string, string> | null;
  save(checkpoints: Record<string, string>): void;
}

export function fileCheckpoints(path: string): CheckpointStore {
  return {
    load: () => {
      if (!existsSync(path)) return null;
      try {
        return (JSON.parse(readFileSync(path, 'utf8')) as { shards: Record<string, string> }).shards;
      } catch {
        // Unreadable (a write cut off before durable writes): no shard is known, so each is read
        // from the oldest record the stream keeps (TRIM_HORIZON), never from its end.
        return {};
      }
    },
    save: (shards) => writeFileDurably(path, JSON.stringify({ shards }, null, 2)),
  };
}

export const memoryCheckpoints = (): CheckpointStore => ({ load: () => null, save: () => undefined });

export interface StreamPipesOptions {
  client: DynamoDBStreamsClient;
  tableName: string;
  send: QueueSender;
  log: Log;
  checkpoints: CheckpointStore;
  rules?: readonly StreamRuleDef[];
  intervalMs?: number;
  /** Sends per record and rule before it is dead-lettered. Default STREAM_MAX_ATTEMPTS. */
  maxAttempts?: number;
  /** Where dead-lettered records are appended (one JSON line each); kept in memory only when absent. */
  deadLetterFile?: string;
}

/** Sends of one record to one rule's queue before it is dead-lettered (about 3 s of retries). */
export const STREAM_MAX_ATTEMPTS = 5;

export interface StreamDeadLetter {
  /** Where it failed: the pipe (the event was refused by the bus) or a stream rule (its queue refused it). */
  stage: 'pipe' | 'rule';
  /** The pipe's or the rule's name. */
  name: string;
  /** The stream bus, or the rule's queue. */
  target: string;
  failed_at: string;
  attempts: number;
  error: string | null;
  record: DynamoDBRecord;
}

interface ShardCursor {
  iterator: string | null;
  closed: boolean;
}

/**
 * Reads every shard of the table's latest stream. On the first run it starts at LATEST (what is
 * already in the table is not news); after a restart it resumes after the checkpointed sequence
 * number, or at TRIM_HORIZON for shards it has not seen (created while it was down, or rolled).
 */
export class StreamPipes {
  private readonly shards = new Map<string, ShardCursor>();
  private checkpoints: Record<string, string> = {};
  private firstRun = true;
  private streamArn: string | null = null;
  private timer: NodeJS.Timeout | null = null;
  private tick: Promise<void> | null = null;
  private stopped = false;
  /** Records given up on since start (also appended to `deadLetterFile`). */
  readonly deadLetters: StreamDeadLetter[] = [];

  constructor(private readonly opts: StreamPipesOptions) {}

  /** Positions the iterators (so writes after start() resolves are seen), then polls. */
  async start(): Promise<void> {
    const saved = this.opts.checkpoints.load();
    this.firstRun = saved === null;
    this.checkpoints = saved ?? {};
    await this.discoverShards();
    this.firstRun = false;
    this.schedule();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    if (this.timer) clearTimeout(this.timer);
    await this.tick;
  }

  private schedule(): void {
    if (this.stopped) return;
    this.timer = setTimeout(() => {
      this.tick = this.pollOnce()
        .then(() => undefined)
        .catch((err: Error) => this.opts.log.error(`streams: poll failed: ${err.message}`))
        .finally(() => this.schedule());
    }, this.opts.intervalMs ?? 500);
    this.timer.unref();
  }

  /** Reads every open shard once and forwards matching records. Returns the number forwarded. */
  async pollOnce(): Promise<number> {
    await this.discoverShards();
    let forwarded = 0;
    for (const [shardId, cursor] of this.shards) {
      if (!cursor.iterator || cursor.closed) continue;
      forwarded += await this.readShard(shardId, cursor);
    }
    return forwarded;
  }

  private async discoverShards(): Promise<void> {
    const { client, tableName } = this.opts;
    if (!this.streamArn) {
      const { Streams } = await client.send(new ListStreamsCommand({ TableName: tableName }));
      this.streamArn = Streams?.at(-1)?.StreamArn ?? null;
      if (!this.streamArn) return;
    }
    let start: string | undefined;
    do {
      const { StreamDescription: d } = await client.send(new DescribeStreamCommand({ StreamArn: this.streamArn, ExclusiveStartShardId: start }));
      for (const shard of d?.Shards ?? []) {
        const id = shard.ShardId!;
        if (!this.shards.has(id)) this.shards.set(id, { iterator: await this.openIterator(id), closed: false });
      }
      start = d?.LastEvaluatedShardId;
    } while (start);
  }

  private async openIterator(shardId: string): Promise<string | null> {
    const seq = this.checkpoints[shardId];
    const attempts: { type: ShardIteratorType; seq?: string }[] = seq
      ? [{ type: 'AFTER_SEQUENCE_NUMBER', seq }, { type: 'TRIM_HORIZON' }]
      : [{ type: this.firstRun ? 'LATEST' : 'TRIM_HORIZON' }];
    for (const a of attempts) {
      try {
        const r = await this.opts.client.send(
          new GetShardIteratorCommand({ StreamArn: this.streamArn!, ShardId: shardId, ShardIteratorType: a.type, SequenceNumber: a.seq }),
        );
        return r.ShardIterator ?? null;
      } catch (err) {
        // A checkpoint older than the stream's retention is no longer valid: read what is left.
        if (a.seq && (err instanceof TrimmedDataAccessException || (err as Error).name === 'ValidationException')) continue;
        throw err;
      }
    }
    return null;
  }

  private async readShard(shardId: string, cursor: ShardCursor): Promise<number> {
    let forwarded = 0;
    try {
      const r = await this.opts.client.send(new GetRecordsCommand({ ShardIterator: cursor.iterator!, Limit: 1000 }));
      for (const record of r.Records ?? []) {
        forwarded += await this.forward(toPipeRecord(record, this.streamArn!));
        this.checkpoints[shardId] = record.dynamodb!.SequenceNumber!;
      }
      if (r.Records?.length) this.opts.checkpoints.save(this.checkpoints);
      cursor.iterator = r.NextShardIterator ?? null;
      cursor.closed = !r.NextShardIterator;
    } catch (err) {
      if (!(err instanceof ExpiredIteratorException)) throw err;
      cursor.iterator = await this.openIterator(shardId);
    }
    return forwarded;
  }

  /**
   * Sends the record to the queue of each stream rule whose pattern matches its event. A record
   * whose event is over EventBridge's limit is dead-lettered by the pipe (the bus refuses the
   * PutEvents entry). A send that keeps failing is retried a bounded number of times (with
   * backoff), then the record is dead-lettered for that rule with a log line, and the stream moves
   * on: one poison record never stops the others (as the pipe's retries and the rules' dead-letter
   * queues do).
   */
  private async forward(record: DynamoDBRecord): Promise<number> {
    if (!matchesPattern(TABLE_STREAM.filter, record)) return 0; // most records (every MODIFY) are not the pipe's
    const body = JSON.stringify(record);
    const event = streamEvent(record);
    const bytes = eventEntryBytes(body);
    if (bytes > EVENT_MAX_BYTES) {
      this.deadLetter({ stage: 'pipe', name: TABLE_STREAM.name, target: 'stream bus' }, record, 1, `the event is ${bytes} bytes, over EventBridge's ${EVENT_MAX_BYTES}`);
      return 0;
    }
    const matching = (this.opts.rules ?? STREAM_RULES).filter((r) => matchesPattern(streamRulePattern(r), event));
    const sent = await Promise.all(matching.map((r) => this.sendWithRetries(r, record, body)));
    return sent.filter(Boolean).length;
  }

  private async sendWithRetries(rule: StreamRuleDef, record: DynamoDBRecord, body: string): Promise<boolean> {
    const attempts = this.opts.maxAttempts ?? STREAM_MAX_ATTEMPTS;
    let lastError: Error | null = null;
    for (let attempt = 1; attempt <= attempts; attempt++) {
      try {
        await this.opts.send(rule.target, body);
        this.opts.log.debug(`streams: ${record.eventName} → rule ${rule.name} → ${rule.target}`);
        return true;
      } catch (err) {
        lastError = err as Error;
        if (attempt < attempts) await new Promise((r) => setTimeout(r, Math.min(2_000, 100 * 2 ** (attempt - 1))));
      }
    }
    this.deadLetter({ stage: 'rule', name: rule.name, target: rule.target }, record, attempts, lastError?.message ?? 'unknown error');
    return false;
  }

  private deadLetter(where: Pick<StreamDeadLetter, 'stage' | 'name' | 'target'>, record: DynamoDBRecord, attempts: number, error: string): void {
    const seq = record.dynamodb?.SequenceNumber ?? '?';
    this.opts.log.error(
      `streams: ${where.stage} ${where.name} gave up on record ${seq} after ${attempts} attempt${attempts === 1 ? '' : 's'} (${error}); ` +
        `dead-lettered${this.opts.deadLetterFile ? ` to ${this.opts.deadLetterFile}` : ''}, moving on`,
    );
    const entry: StreamDeadLetter = { ...where, failed_at: new Date().toISOString(), attempts, error, record };
    if (this.opts.deadLetterFile) appendFileSync(this.opts.deadLetterFile, `${JSON.stringify(entry)}\n`);
    this.deadLetters.push(entry);
  }
}

/**
 * The size EventBridge counts for the pipe's PutEvents entry: source, detail type, the detail (the
 * record's JSON) and the 14 bytes of its time, in UTF-8.
 */
export function eventEntryBytes(detailJson: string): number {
  return Buffer.byteLength(TABLE_STREAM.source) + Buffer.byteLength(TABLE_STREAM.detailType) + Buffer.byteLength(detailJson) + 14;
}
