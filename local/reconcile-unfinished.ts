/**
 * The start-up reconcilers of the local runtime (D64): after a stop that saved no queue snapshot
 * (SIGKILL, power loss), the table still says what was accepted and not finished, and these put it
 * back on the queues. They run before the pollers and stream pipes start, and every consumer they
 * feed is idempotent (the same work is never done twice; a webhook may arrive again, always with
 * the same event id):
 *
 * - uploads: every submission `pending_score` (or `awaiting_upload` whose objects have landed) gets
 *   the S3 "Object Created" event of each of its stored objects again; scoring and annotation skip
 *   what they already did and take the verdict once both are done;
 * - webhooks: every event whose delivery is unfinished: one never fanned out gets its stream
 *   record again (fan-out); a pending delivery gets its attempt message again, under the token the
 *   delivery holds (so exactly one chain goes on); an aggregate left behind is rewritten;
 * - sandbox: every unfinished simulation gets its next tick again; a test job whose simulation
 *   never started gets its `job.created` record again;
 * - exports: every export still pending or running gets its INSERT record again (the build claims
 *   it once, and runs one that died again, counting the attempt);
 * - withdrawals: every override that withdrew Files whose objects are not recorded as deleted gets
 *   its `submission.overridden` event's INSERT record again (deleting twice is harmless);
 * - top-ups: every crossing of the low-balance threshold of the last 24 hours with auto top-up on
 *   whose top-up is not applied or declined gets its `credits.low_balance` INSERT record again (the
 *   top-up's session is named after the event, so it is bought once);
 * - cancellations: every job cancelled in the last two hours gets its `job.cancelled` INSERT record
 *   again (the consumer ends only what is still in play).
 *
 * No index lists "unfinished" items across tenants, so each reconciler reads the table once with a
 * filtered, projected Scan. It runs only after an unclean stop, on a local table.
 */
import { GetCommand, paginateScan } from '@aws-sdk/lib-dynamodb';
import { marshall } from '@aws-sdk/util-dynamodb';
import { randomUUID } from 'node:crypto';
import { db, tableName } from '../shared/db/client';
import { keys } from '../shared/db/keys';
import { matchesPattern, STREAM_RULES, streamEvent, streamRulePattern, TABLE_STREAM } from '../shared/manifest/wiring';
import { headObject } from '../shared/storage/s3';
import { topUpSessionId } from '../shared/billing/auto-top-up';
import { writeAggregate, type DeliveryEntry } from '../shared/webhooks/delivery-store';
import type { AttemptMessage } from '../shared/webhooks/queue';
import { retryInFlight, type PlannedUpload, type SubmissionItem } from '../shared/work/model';
import type { ReconcileContext, Reconciler } from './reconcilers';

type Item = Record<string, unknown>;

async function* scan(filter: string, values: Record<string, unknown>, names: Record<string, string> = {}): AsyncGenerator<Item> {
  const pages = paginateScan(
    { client: db() },
    {
      TableName: tableName(),
      FilterExpression: filter,
      ExpressionAttributeValues: values,
      ...(Object.keys(names).length ? { ExpressionAttributeNames: names } : {}),
      ConsistentRead: true,
    },
  );
  for await (const page of pages) yield* page.Items ?? [];
}

/** The S3 "Object Created" event EventBridge delivers for an object of the bucket. */
export function objectCreatedEvent(ctx: Pick<ReconcileContext, 'bucketName' | 'account' | 'region'>, key: string, size: number) {
  return {
    version: '0',
    id: randomUUID(),
    'detail-type': 'Object Created',
    source: 'aws.s3',
    account: ctx.account,
    time: new Date().toISOString().replace(/\.\d{3}Z$/, 'Z'),
    region: ctx.region,
    resources: [`arn:aws:s3:::${ctx.bucketName}`],
    detail: {
      version: '0',
      bucket: { name: ctx.bucketName },
      object: { key, size, etag: '', sequencer: '0' },
      'request-id': 'reconciler',
      requester: ctx.account,
      'source-ip-address': '127.0.0.1',
      reason: 'PutObject',
    },
  };
}

/** The stream record the stream rules deliver for the INSERT of `item`. */
function insertRecord(item: Item) {
  return {
    eventID: randomUUID(),
    eventName: 'INSERT',
    eventVersion: '1.1',
    eventSource: 'aws:dynamodb',
    dynamodb: {
      Keys: marshall({ PK: item.PK, SK: item.SK }),
      NewImage: marshall(item, { removeUndefinedValues: true, convertClassInstanceToMap: true }),
      StreamViewType: 'NEW_AND_OLD_IMAGES',
    },
  };
}

/** Sends `item`'s INSERT record to the stream rules that take it (optionally only to the queue `only`). */
async function replayInsert(ctx: ReconcileContext, item: Item, only?: string): Promise<number> {
  const record = insertRecord(item);
  if (!matchesPattern(TABLE_STREAM.filter, record)) return 0;
  const event = streamEvent(record);
  const rules = STREAM_RULES.filter((r) => (!only || r.target === only) && matchesPattern(streamRulePattern(r), event));
  for (const r of rules) await ctx.send(r.target, JSON.stringify(record));
  return rules.length;
}

export const uploadsReconciler: Reconciler = {
  name: 'unscored-uploads',
  async run(ctx) {
    let routed = 0;
    // A retry in flight (its files planned, the submission still retry_pending) counts too: its
    // landed files were on their way to scoring when the run was killed.
    const subs = scan('entity = :e AND #s IN (:ps, :au, :rp)', { ':e': 'submission', ':ps': 'pending_score', ':au': 'awaiting_upload', ':rp': 'retry_pending' }, { '#s': 'status' });
    for await (const sub of subs) {
      if (sub.status === 'retry_pending' && !retryInFlight(sub as unknown as SubmissionItem)) continue; // no retry planned yet
      for (const u of (sub.uploads ?? []) as PlannedUpload[]) {
        const head = await headObject(u.key);
        if (!head) continue; // not uploaded yet: the worker's upload will start the pipeline
        await ctx.route(objectCreatedEvent(ctx, u.key, head.size));
        routed++;
      }
    }
    ctx.log.info(`reconciler unscored-uploads: ${routed} stored files sent to scoring and annotation again`);
  },
};

export const webhooksReconciler: Reconciler = {
  name: 'undelivered-events',
  async run(ctx) {
    let fanOuts = 0;
    let attempts = 0;
    for await (const ev of scan('entity = :e AND delivery_status = :p', { ':e': 'event', ':p': 'pending' })) {
      const deliveries = ev.deliveries as Record<string, DeliveryEntry> | undefined;
      // Never fanned out, or killed between writing the empty map and its entries (their first
      // write): nothing is finished, so the fan-out runs again (it keeps what exists).
      if (!deliveries || Object.keys(deliveries).length === 0) {
        fanOuts += await replayInsert(ctx, ev, 'webhooks');
        continue;
      }
      // Written before fan-outs claimed their deliveries: a first attempt without a token. A fan-out
      // to many endpoints writes its entries 50 at a time; a run killed in between left a first
      // attempt claimed and never made: the fan-out runs again too, creating the entries still
      // missing (the claimed ones keep their token and go back below).
      const unclaimed = Object.values(deliveries).some((d) => d.status === 'pending' && d.attempts === 0 && !d.next_token);
      const neverAttempted = Object.values(deliveries).some((d) => d.status === 'pending' && d.attempts === 0);
      if (unclaimed || neverAttempted) fanOuts += await replayInsert(ctx, ev, 'webhooks');
      const pending = Object.entries(deliveries).filter(([, d]) => d.status === 'pending' && d.next_token);
      if (!pending.length && !unclaimed) {
        await writeAggregate(ev); // every delivery finished; only the aggregate was left behind
        continue;
      }
      for (const [endpointId, d] of pending) {
        // As the writer of the entry sent it: a replay stays a replay, keeping the retries it took over.
        const replay = d.next_replay === true;
        const msg: AttemptMessage = {
          kind: 'webhook.attempt',
          event_id: ev.id as string,
          endpoint_id: endpointId,
          org_id: ev.org_id as string,
          environment: ev.environment as AttemptMessage['environment'],
          token: d.next_token!,
          expect_attempts: d.attempts,
          retry_index: d.retry_index ?? (replay ? 0 : d.attempts), // its place in the retry schedule (a replay may keep an earlier one)
          replay,
          ...(replay && d.retry_index != null ? { keep_retries: true } : {}),
          due_at: d.next_attempt_at ?? new Date().toISOString(),
          created_ms: Date.now(),
        };
        await ctx.send('webhooks', JSON.stringify(msg));
        attempts++;
      }
    }
    ctx.log.info(`reconciler undelivered-events: ${fanOuts} events fanned out again, ${attempts} pending deliveries re-enqueued`);
  },
};

export const sandboxReconciler: Reconciler = {
  name: 'sandbox-simulations',
  async run(ctx) {
    let ticks = 0;
    let starts = 0;
    for await (const s of scan('entity = :e AND finished = :null', { ':e': 'sandbox_state', ':null': null })) {
      await ctx.send('sandbox', JSON.stringify({ kind: 'sandbox.tick', job_id: s.job_id, seq: s.seq }));
      ticks++;
    }
    const created = scan('entity = :e AND #t = :t AND environment = :env', { ':e': 'event', ':t': 'job.created', ':env': 'test' }, { '#t': 'type' });
    for await (const ev of created) {
      const jobId = ev.job_id as string | null;
      if (!jobId) continue;
      const state = await db().send(new GetCommand({ TableName: tableName(), Key: keys.sandboxState(jobId) }));
      if (!state.Item) starts += await replayInsert(ctx, ev, 'sandbox');
    }
    ctx.log.info(`reconciler sandbox-simulations: ${ticks} simulations resumed, ${starts} started`);
  },
};

export const exportsReconciler: Reconciler = {
  name: 'unbuilt-exports',
  async run(ctx) {
    let sent = 0;
    for await (const e of scan('entity = :e AND #s IN (:p, :r)', { ':e': 'export', ':p': 'pending', ':r': 'running' }, { '#s': 'status' })) {
      sent += await replayInsert(ctx, e, 'exports');
    }
    ctx.log.info(`reconciler unbuilt-exports: ${sent} exports sent to the builder again`);
  },
};

const getItem = async (key: { PK: string; SK: string }) => (await db().send(new GetCommand({ TableName: tableName(), Key: key, ConsistentRead: true }))).Item;
type EventData = { decision?: string; submission_id?: string; auto_top_up_enabled?: boolean };

/**
 * The start of a look-back window of `ms` before the killed run began (so a long stop between the
 * crash and this start does not push its events out of the window), or before now when unknown.
 */
function windowBefore(ctx: ReconcileContext, ms: number): string {
  const from = ctx.killedRunStartedAt ? Math.min(Date.parse(ctx.killedRunStartedAt), Date.now()) : Date.now();
  return new Date(from - ms).toISOString();
}

/**
 * A reconciler that sends the INSERT record of every event of `type` (created since `since`, when
 * given) whose work `unfinished` says is not done to the stream rule's queue `queue` again.
 */
function eventReplay(o: { name: string; type: string; queue: string; what: string; since?: (ctx: ReconcileContext) => string; unfinished(data: EventData, ev: Item): Promise<boolean> }): Reconciler {
  return {
    name: o.name,
    async run(ctx) {
      let sent = 0;
      const values: Record<string, unknown> = { ':e': 'event', ':t': o.type };
      if (o.since) values[':since'] = o.since(ctx);
      for await (const ev of scan(`entity = :e AND #t = :t${o.since ? ' AND created_at >= :since' : ''}`, values, { '#t': 'type' })) {
        const data = ((ev.envelope as { data?: EventData } | undefined)?.data ?? {}) as EventData;
        if (await o.unfinished(data, ev)) sent += await replayInsert(ctx, ev, o.queue);
      }
      ctx.log.info(`reconciler ${o.name}: ${sent} ${o.what}`);
    },
  };
}

export const withdrawalsReconciler = eventReplay({
  name: 'undeleted-withdrawals',
  type: 'submission.overridden',
  queue: 'withdrawals',
  what: 'withdrawals sent to the deleter again',
  async unfinished(data) {
    if (data.decision !== 'reject' || !data.submission_id) return false;
    const sub = await getItem(keys.submission(data.submission_id));
    return !!sub && !sub.withdrawn_objects_deleted_at && !!(sub.withdrawn_object_keys as unknown[] | undefined)?.length;
  },
});

export const topUpsReconciler = eventReplay({
  name: 'unapplied-top-ups',
  type: 'credits.low_balance',
  queue: 'top-ups',
  what: 'auto top-ups sent to the buyer again',
  since: (ctx) => windowBefore(ctx, 24 * 3600_000),
  async unfinished(data, ev) {
    if (data.auto_top_up_enabled !== true) return false;
    const session = await getItem(keys.checkoutSession(topUpSessionId(ev.id as string)));
    return !session || session.status === 'open';
  },
});

export const cancellationsReconciler = eventReplay({
  name: 'unended-cancellations',
  type: 'job.cancelled',
  queue: 'cancellations',
  what: 'cancelled jobs sent to end their submissions again',
  // After two hours nothing of a cancelled job is in play any more: reservations and retry windows
  // last one hour, and the sweep and the verdicts end the rest. Ending again is harmless.
  since: (ctx) => windowBefore(ctx, 2 * 3600_000),
  async unfinished() {
    return true;
  },
});

/** Registered by the local runtime, in this order. */
export const UNFINISHED_WORK: readonly Reconciler[] = [
  uploadsReconciler,
  webhooksReconciler,
  sandboxReconciler,
  exportsReconciler,
  withdrawalsReconciler,
  topUpsReconciler,
  cancellationsReconciler,
];
