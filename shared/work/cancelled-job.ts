/**
 * A cancelled job's pending submissions are rejected (spec, job status table: cancel → "workers
 * notified, pending submissions rejected, approved files kept").
 *
 * The cancel's transaction writes `job.cancelled`; its INSERT record reaches the `cancellations`
 * queue through the table stream (pipe `job-cancelled`), so the rejections are queued by the same
 * commit and happen at least once, whatever becomes of the cancel's function afterwards. Here, each
 * submission still in play is ended in its own transaction with the job's slot counters:
 *
 * - `awaiting_upload` (a worker holds a reservation): the reservation ends, the submission becomes
 *   `cancelled` (worker-only, D24; the buyer never saw it), its reserved slots are released;
 * - `pending_score` (uploaded, no verdict yet): `rejected` without a score (ai_star_rating,
 *   dimensions and reason_codes null: no model decided it), `submission.rejected` emitted, the
 *   bytes tagged for the lifecycle like any rejection; stages still running for it find it decided
 *   and stop (locate.ts), so nothing more is scored or charged;
 * - `retry_pending` (D27): the retry window ends, the first verdict becomes final (`rejected`, its
 *   rating and codes kept), as when the window runs out.
 *
 * The worker sees the new status on its submission (the worker routes); the buyer sees the
 * rejections and their events. No money moves: the cancel already refunded the whole unused escrow.
 * Idempotent: a redelivered message finds nothing left in play. Races are settled by the same
 * conditions as everywhere (status and round on the submission, the reservation's identity, the
 * job's counters): an upload completing meanwhile makes the reservation's release fail, and the
 * submission, now `pending_score`, is rejected instead; a verdict taken meanwhile stands (a
 * cancelled job never approves: shared/ledger/escrow.ts `approvalAllowed`).
 */
import { paginateQuery } from '@aws-sdk/lib-dynamodb';
import { db, tableName } from '../db/client';
import { indexKeys, keys } from '../db/keys';
import { Tx } from '../db/tx';
import { now, nowIso } from '../clock';
import { audit } from '../audit';
import { emit } from '../outbox';
import { ConditionFailed } from '../errors';
import { logger } from '../logger';
import { systemContext } from '../context';
import { isId } from '../ids';
import { getJobItem } from '../jobs';
import { categoryOf } from '../jobs/model';
import { roundKeyframeKeys, tagVerdict } from '../storage/s3';
import { summaryUpdate } from './summary';
import { addSlotChange, withJobRetry } from './slots';
import { getReservation, getRetryWindow, getSubmissionItem, type ReservationItem } from './reservations';
import { releaseReservation } from './release-reservation';
import { jsonBody, PoisonMessage, type StageOutcome } from './stage-message';
import type { SubmissionItem } from './model';
import { streamRecordOf } from '../manifest/stream-event';

const ACTOR = 'job-cancellation';
/** Tries per submission: each failed try means it changed meanwhile (an upload, a verdict). */
const MAX_TRIES = 5;

interface StreamImage {
  entity?: { S?: string };
  type?: { S?: string };
  envelope?: { M?: { data?: { M?: { job_id?: { S?: string } } } } };
}

/**
 * The cancelled job: from the `job.cancelled` event's INSERT record (the pipe), or from
 * `{"kind":"job.cancelled","job_id":"job_…"}` (an operator's redrive, docs/operations.md).
 */
export function cancelledJobOf(body: string): string {
  const record = streamRecordOf(jsonBody<{ eventName: string; dynamodb: { NewImage?: StreamImage }; kind: string; job_id: unknown }>(body));
  if (record?.kind === 'job.cancelled') {
    if (typeof record.job_id !== 'string' || !isId('job', record.job_id)) throw new PoisonMessage('job.cancelled names no job');
    return record.job_id;
  }
  const image = record?.dynamodb?.NewImage;
  if (record?.eventName !== 'INSERT' || image?.entity?.S !== 'event' || image.type?.S !== 'job.cancelled') {
    throw new PoisonMessage('not the INSERT record of a job.cancelled event');
  }
  const id = image.envelope?.M?.data?.M?.job_id?.S;
  if (typeof id !== 'string') throw new PoisonMessage('the event names no job');
  return id;
}

/** Ends every submission of the cancelled job `jobId` that is still in play. */
export async function endSubmissionsOfCancelledJob(jobId: string): Promise<StageOutcome> {
  const job = await getJobItem(jobId, true);
  if (!job || job.status !== 'cancelled') return 'ignored';
  let ended = 0;
  // Reservations first (a consistent read of the job's partition): an upload that completes after
  // this read leaves its submission pending_score, which the failed release itself then finds.
  for (const res of await reservationsOf(jobId)) {
    if (await endSubmission(res.submission_id)) ended++;
  }
  // The submission list (GSI1) takes in a write asynchronously: a submission that became
  // retry_pending (its verdict) or pending_score (its upload) just before the cancel may not be
  // listed yet. Nothing else would end a retry window before it runs out, so the list is read once
  // the cancel is INDEX_SETTLE_MS old. A submission the index still lacks then (an index lagging by
  // seconds) ends as without a cancel: a pending upload at its verdict, always a rejection on a
  // cancelled job, a retry window when it runs out.
  await untilSettled(job.cancelled_at as string | undefined);
  for (const subId of await pendingSubmissionIds(jobId)) {
    if (await endSubmission(subId)) ended++;
  }
  return ended > 0 ? 'stored' : 'skipped';
}

/** How long after the cancel the submission index is read: DynamoDB's indexes lag "a fraction of a second, under normal conditions". */
const INDEX_SETTLE_MS = 2_000;

/** Waits until the cancel at `cancelledAt` is INDEX_SETTLE_MS old (at most that long). */
async function untilSettled(cancelledAt: string | undefined): Promise<void> {
  const at = cancelledAt ? Date.parse(cancelledAt) : NaN;
  const wait = Number.isFinite(at) ? Math.min(INDEX_SETTLE_MS, at + INDEX_SETTLE_MS - now().getTime()) : 0;
  if (wait > 0) await new Promise((resolve) => setTimeout(resolve, wait));
}

async function reservationsOf(jobId: string): Promise<ReservationItem[]> {
  const out: ReservationItem[] = [];
  const pages = paginateQuery(
    { client: db(), pageSize: 100 },
    {
      TableName: tableName(),
      KeyConditionExpression: 'PK = :pk AND begins_with(SK, :res)',
      ExpressionAttributeValues: { ':pk': indexKeys.jobReservations(jobId).pk, ':res': indexKeys.jobReservations(jobId).skPrefix },
      ConsistentRead: true,
    },
  );
  for await (const page of pages) out.push(...((page.Items ?? []) as ReservationItem[]));
  return out;
}

/** The job's uploaded submissions without a final verdict, from its submission list (GSI1). */
async function pendingSubmissionIds(jobId: string): Promise<string[]> {
  const out: string[] = [];
  const pages = paginateQuery(
    { client: db(), pageSize: 100 },
    {
      TableName: tableName(),
      IndexName: indexKeys.jobSubmissions(jobId).index,
      KeyConditionExpression: 'GSI1PK = :pk',
      FilterExpression: '#s IN (:p, :r)',
      ProjectionExpression: 'id',
      ExpressionAttributeNames: { '#s': 'status' },
      ExpressionAttributeValues: { ':pk': indexKeys.jobSubmissions(jobId).pk, ':p': 'pending_score', ':r': 'retry_pending' },
    },
  );
  for await (const page of pages) out.push(...(page.Items ?? []).map((i) => i.id as string));
  return out;
}

/** Ends one submission as its current status says (read consistently). True when this call ended it. */
async function endSubmission(subId: string): Promise<boolean> {
  const ctx = systemContext(ACTOR);
  for (let attempt = 0; attempt < MAX_TRIES; attempt++) {
    const sub = await getSubmissionItem(subId);
    if (!sub) return false;
    if (sub.status === 'awaiting_upload') {
      const res = await getReservation(sub.job_id, sub.worker_id);
      if (res?.submission_id === sub.id && (await releaseReservation(ctx, res, 'cancelled'))) return tagRejected(sub); // pre-signed bytes that landed already
    } else if (sub.status === 'retry_pending') {
      const window = await getRetryWindow(sub.id);
      if (window && (await releaseReservation(ctx, window, 'cancelled'))) return tagRejected(sub);
    } else if (sub.status === 'pending_score') {
      if (await rejectUnscored(sub)) return tagRejected(sub);
    } else {
      return false; // decided, withdrawn or expired: nothing in play
    }
  }
  throw new Error(`submission ${subId} kept changing while its job's cancellation ended it`);
}

/** pending_score → rejected without a verdict: its pending slots are released, the buyer is told. */
async function rejectUnscored(sub: SubmissionItem): Promise<boolean> {
  const reasoning = 'The job was cancelled before this submission was scored.';
  try {
    await withJobRetry(sub.job_id, async (job) => {
      const at = nowIso();
      const tx = new Tx();
      tx.update(
        'submission',
        keys.submission(sub.id),
        'SET #s = :st, ai_star_rating = :null, ai_reasoning = :why, dimensions = :null, reason_codes = :null, updated_at = :t, final_at = :t',
        {
          condition: '#s = :pending AND #r = :round',
          names: { '#s': 'status', '#r': 'round' },
          values: { ':st': 'rejected', ':null': null, ':why': reasoning, ':t': at, ':pending': 'pending_score', ':round': sub.round },
        },
      );
      const cat = sub.category ?? categoryOf(sub.uploads[0]?.content_type ?? 'image/jpeg');
      // No stars: only a verdict adds to the summary's ratings (D56).
      addSlotChange(tx, job, { pending: -Number(sub.slots_held ?? sub.uploads.length), extra: summaryUpdate(cat, 'rejected') });
      emit(tx, {
        orgId: sub.org_id,
        env: sub.environment,
        type: 'submission.rejected',
        jobId: sub.job_id,
        data: { job_id: sub.job_id, submission_id: sub.id, ai_star_rating: null, ai_reasoning: reasoning, reason_codes: null },
      });
      audit(tx, {
        orgId: sub.org_id,
        eventType: 'submission.rejected',
        actor: { type: 'system', id: ACTOR },
        env: sub.environment,
        resource: { type: 'submission', id: sub.id },
        jobId: sub.job_id,
        requestId: null,
        data: { reason: 'job_cancelled' },
      });
      await tx.commit();
    });
  } catch (e) {
    if (e instanceof ConditionFailed && e.reasons.includes('submission')) return false; // decided meanwhile
    throw e;
  }
  return true;
}

/**
 * The bytes of the submission's current round, like any rejection's: tagged for the lifecycle rule
 * (missing objects are skipped; bytes that land later are tagged by the scoring stage, locate.ts).
 * Best effort: a failure is logged and the bytes are kept. Returns true (the submission was ended).
 */
async function tagRejected(sub: SubmissionItem): Promise<true> {
  const objects = sub.round ? [...sub.uploads.map((u) => u.key), ...roundKeyframeKeys(sub)] : [];
  await tagVerdict(objects, 'rejected').catch((err: Error) => logger.warn('tagging rejected bytes failed; they are kept', { error: err, submission_id: sub.id }));
  return true;
}
