/**
 * The fan-in and the verdict (D26, D27, D29, D47, D68).
 *
 * Both pipeline stages write their result for a file into `parts[file_id]` of the submission and
 * then call `tryVerdictOn` with the item their conditional write returned (ALL_NEW, or ALL_OLD when
 * the condition failed), so no second read: the later of two writes holds both results. Other
 * callers (an upload completing after both stages) use `tryVerdict`, which reads consistently. The
 * verdict is taken once every planned file has a score AND annotations (or at once when a
 * pre-check rejected a file, D26), in one transaction conditioned on `status = pending_score` and
 * the upload round. Of two concurrent callers exactly one commits; a duplicated S3 event finds the
 * part already written and the status already final, so it never approves or charges twice.
 *
 * The verdict is decided on the files' results as verdict-input.ts combines them (readiness, content
 * policy, undecodable bytes, speech, reason codes); its reason codes are recorded on the submission
 * and in the events (D68: always an array, approved `[]`).
 *
 * Approval (D29) is one transaction: the submission, one File per uploaded file (with its
 * annotations, never changed afterwards), the duplicate guards of each content hash in the job
 * and the organization and the near-duplicate buckets (D26, D69: shared/trust/indexes.ts), the
 * ledger's `addApprovalCharges` (counters, status transitions, escrow → `deduction` rows,
 * `job.completed`), the worker payout (`keys.workerPayout`), the events and the audit record.
 * Rejections free the slots (`filled` → `open`, slots.ts). `retry_pending` keeps them and opens a
 * 60-minute retry window.
 */
import { keys } from '../db/keys';
import { Tx } from '../db/tx';
import { newId } from '../ids';
import { addMs, now, nowIso } from '../clock';
import { emit } from '../outbox';
import { audit } from '../audit';
import { ConditionFailed } from '../errors';
import { logger, withChildLogScope } from '../logger';
import { addApprovalCharges, approvalAllowed } from '../ledger/escrow';
import { summaryUpdate as summaryClauses } from './summary';
import { ACTIVE_STATUSES, categoryOf, type JobItem } from '../jobs/model';
import { verdict, DEFAULT_THRESHOLD, type Verdict } from '../scoring/verdict';
import { fileItem } from '../files';
import { addApprovalIndexes } from '../trust/indexes';
import { addPayoutAndApprovedEvent } from './approval-records';
import { roundKeyframeKeys, roundObjectKeys, tagVerdict } from '../storage/s3';
import { addSlotChange, withJobRetry } from './slots';
import { getSubmissionItem, reservationItem } from './reservations';
import { RESERVATION_MS, type SubmissionItem } from './model';
import { annotationsOf, combine, finalCodes, readyForVerdict, type Combined } from './verdict-input';

/**
 * Runs the fan-in check on a consistent read and, when ready, the verdict. Returns the verdict taken
 * here, if any. `since`: the request's start, when a route takes the verdict (its rebuild budgets
 * count from there).
 */
export function tryVerdict(subId: string, since?: number): Promise<Verdict | null> {
  return withChildLogScope({ phase: 'fan-in' }, async () => decideIfReady(await getSubmissionItem(subId), since));
}

/**
 * The fan-in on an item the caller just got from DynamoDB as it is after its own write (a stage's
 * UpdateItem with ReturnValues ALL_NEW, or ALL_OLD when its condition failed): no second read.
 * Of two stages writing concurrently, the later write's item holds both results, so at least one
 * of them sees the submission ready; the verdict transaction's condition lets exactly one commit.
 */
export function tryVerdictOn(sub: SubmissionItem | undefined): Promise<Verdict | null> {
  return withChildLogScope({ phase: 'fan-in' }, () => decideIfReady(sub));
}

async function decideIfReady(sub: SubmissionItem | undefined, since?: number): Promise<Verdict | null> {
  if (!sub || !readyForVerdict(sub)) return null;
  const v = await decide(sub, since);
  if (v === 'rejected') await markRejectedBytes(sub);
  return v;
}

/**
 * After a rejection committed: tag the round's bytes and a video's keyframes so the bucket's
 * lifecycle rule deletes them once the override window has passed (D71 keeps them that long).
 * The keyframes are read again after the commit: an annotation stored meanwhile is either seen
 * here or sees the rejection itself (annotation-stage.ts tags its keyframes then). Best effort: a
 * failure is logged and the objects are kept, never lost.
 */
async function markRejectedBytes(sub: SubmissionItem): Promise<void> {
  const latest = (await getSubmissionItem(sub.id).catch(() => undefined)) ?? sub;
  const keys = [...uploadObjectKeys(sub), ...roundKeyframeKeys(latest)];
  await tagVerdict(keys, 'rejected').catch((err: Error) => logger.warn('tagging rejected bytes failed; they are kept', { error: err, submission_id: sub.id }));
}

/** The object keys of the submission's current upload round. */
export function uploadObjectKeys(sub: SubmissionItem): string[] {
  return roundObjectKeys(sub);
}


async function decide(sub: SubmissionItem, since = Date.now()): Promise<Verdict | null> {
  const c = combine(sub);
  const hashes = sub.uploads.map((u) => sub.parts[u.file_id]?.metadata?.content_hash ?? '');
  const dupInside = new Set(hashes).size !== hashes.length;
  try {
    return await withJobRetry(sub.job_id, async (job) => {
      const threshold = Number(job.min_star_rating ?? DEFAULT_THRESHOLD);
      let v = c.precheck ? 'rejected' : verdict(c.stars, threshold, Number(sub.attempt));
      if (v === 'approved' && dupInside)
        return reject(sub, job, { ...c, stars: 1, precheck: true, annotations: null, reasonCodes: ['duplicate'], dimensions: null, reasoning: 'Rejected before scoring: two files of this submission are identical.' });
      if (v === 'approved' && !approvalAllowed(job, sub.uploads.length)) {
        // D68: every verdict carries an array. Its codes name what fell short in the file, and nothing
        // did (it scored at or above the threshold): [] and the reasoning says why it is rejected.
        return reject(sub, job, { ...c, reasonCodes: [], reasoning: `${c.reasoning} The job no longer takes files (it is ${job.status}).` });
      }
      if (v === 'retry_pending' && !ACTIVE_STATUSES.includes(job.status)) v = 'rejected';
      const decided = { ...c, reasonCodes: finalCodes(v, c, threshold) };
      if (v === 'approved') return approve(sub, job, decided);
      if (v === 'retry_pending') return retryPending(sub, decided);
      return reject(sub, job, decided);
    }, undefined, undefined, since);
  } catch (e) {
    if (e instanceof ConditionFailed && e.reasons.some((r) => r?.startsWith('hash:'))) {
      // D26: identical bytes were approved for this job meanwhile (the guard is created on approval).
      return withJobRetry(sub.job_id, (job) =>
        reject(sub, job, { ...c, stars: 1, precheck: true, annotations: null, reasonCodes: ['duplicate'], dimensions: null, reasoning: 'Rejected before scoring: the file is identical to a file already approved for this job.' }),
        undefined,
        undefined,
        since,
      ).catch(lostRace);
    }
    return lostRace(e);
  }
}

/** The submission was decided by someone else (its condition failed): not an error. */
function lostRace(e: unknown): null {
  if (e instanceof ConditionFailed && e.reasons.includes('submission')) return null;
  throw e;
}

function submissionUpdate(tx: Tx, sub: SubmissionItem, status: string, c: Combined, extra: { set?: string[]; values?: Record<string, unknown> } = {}) {
  const at = nowIso();
  const history = { attempt: Number(sub.attempt), status, ai_star_rating: c.stars, ai_reasoning: c.reasoning, dimensions: c.dimensions, reason_codes: c.reasonCodes, scored_at: at };
  tx.update(
    'submission',
    keys.submission(sub.id),
    `SET #s = :st, ai_star_rating = :stars, ai_reasoning = :why, dimensions = :dims, reason_codes = :codes, scored_at = :t, updated_at = :t, attempts = list_append(if_not_exists(attempts, :empty), :h)${extra.set?.length ? `, ${extra.set.join(', ')}` : ''}`,
    {
      condition: '#s = :pending AND #r = :round',
      names: { '#s': 'status', '#r': 'round' },
      values: {
        ':st': status,
        ':stars': c.stars,
        ':why': c.reasoning,
        ':dims': c.dimensions,
        ':codes': c.reasonCodes,
        ':t': at,
        ':empty': [],
        ':h': [history],
        ':pending': 'pending_score',
        ':round': sub.round,
        ...(extra.values ?? {}),
      },
    },
  );
  return at;
}

function scoredEvent(tx: Tx, sub: SubmissionItem, status: string, c: Combined) {
  emit(tx, {
    orgId: sub.org_id,
    env: sub.environment,
    type: 'submission.scored',
    jobId: sub.job_id,
    // The annotations are the first file's (the event stays small whatever the files' transcripts);
    // `annotations_file_id` names it. Every approved file's are on its File.
    data: {
      submission_id: sub.id,
      job_id: sub.job_id,
      status,
      ai_star_rating: c.stars,
      dimensions: c.dimensions,
      reason_codes: c.reasonCodes,
      annotations: c.annotations,
      annotations_file_id: c.annotations ? sub.uploads[0]!.file_id : null,
    },
  });
}

function verdictAudit(tx: Tx, sub: SubmissionItem, type: string, data: Record<string, unknown>) {
  audit(tx, {
    orgId: sub.org_id,
    eventType: type,
    actor: { type: 'system', id: 'pipeline' },
    env: sub.environment,
    resource: { type: 'submission', id: sub.id },
    jobId: sub.job_id,
    requestId: null,
    data,
  });
}

async function approve(sub: SubmissionItem, job: JobItem, c: Combined): Promise<Verdict> {
  const tx = new Tx();
  const n = sub.uploads.length;
  const cat = sub.category ?? categoryOf(sub.uploads[0]!.content_type);
  const payout = Number(job.worker_payout_per_file_cents) * n;
  const payId = newId('payout');
  const at = submissionUpdate(tx, sub, 'approved', c, {
    set: ['file_ids = :fids', 'payout_cents = :pay', 'payout_id = :pid'],
    values: { ':fids': sub.uploads.map((u) => u.file_id), ':pay': payout, ':pid': payId },
  });
  for (const u of sub.uploads) {
    const part = sub.parts[u.file_id]!;
    tx.create(`file:${u.file_id}`, fileItem(sub, u, { ...part, annotations: annotationsOf(part) }, part.score!.ai_star_rating, at));
  }
  // D26/D69: identical bytes are refused in the job and organization-wide from now on, near-copies organization-wide.
  addApprovalIndexes(tx, sub.org_id, sub.environment, sub.uploads.map((u) => approvedRef(sub, u.file_id)), at);
  // The submission's events first, then the job's (a job.completed follows from this approval).
  scoredEvent(tx, sub, 'approved', c);
  addPayoutAndApprovedEvent(tx, sub, { payId, payout, files: n, stars: c.stars, at });
  addApprovalCharges(tx, {
    job,
    submissionId: sub.id,
    files: n,
    pendingReleased: Number(sub.slots_held ?? n),
    jobUpdate: summaryClauses(cat, 'approved', c.stars),
  });
  verdictAudit(tx, sub, 'submission.approved', { ai_star_rating: c.stars, files: n, worker_payout_cents: payout });
  // The job update above is conditioned on the snapshot's status and counters, so the board
  // index it writes is exact: no availability reconcile (and no job read) after the commit.
  await tx.commit();
  return 'approved';
}

/** What the trust indexes need of an approved file (shared/trust). */
export function approvedRef(sub: SubmissionItem, fileId: string) {
  const u = sub.uploads.find((x) => x.file_id === fileId)!;
  const part = sub.parts[fileId]!;
  return { fileId, submissionId: sub.id, jobId: sub.job_id, contentHash: part.metadata?.content_hash ?? '', perceptualHash: part.perceptual_hash ?? null, contentType: u.content_type };
}

async function reject(sub: SubmissionItem, job: JobItem, c: Combined): Promise<Verdict> {
  const tx = new Tx();
  const cat = sub.category ?? categoryOf(sub.uploads[0]!.content_type);
  submissionUpdate(tx, sub, 'rejected', c, { set: ['final_at = :t'] });
  // The slots come back (filled → open); cancelled / completed jobs only release the counter.
  addSlotChange(tx, job, { pending: -Number(sub.slots_held ?? sub.uploads.length), extra: summaryClauses(cat, 'rejected', c.stars) });
  scoredEvent(tx, sub, 'rejected', c);
  emit(tx, {
    orgId: sub.org_id,
    env: sub.environment,
    type: 'submission.rejected',
    jobId: sub.job_id,
    data: { job_id: sub.job_id, submission_id: sub.id, ai_star_rating: c.stars, ai_reasoning: c.reasoning, reason_codes: c.reasonCodes },
  });
  verdictAudit(tx, sub, 'submission.rejected', { ai_star_rating: c.stars, precheck: c.precheck, reason_codes: c.reasonCodes });
  await tx.commit();
  return 'rejected';
}

/** D27/D47: one retry allowed within a 60-minute window; only `submission.scored` is emitted. */
async function retryPending(sub: SubmissionItem, c: Combined): Promise<Verdict> {
  const tx = new Tx();
  const until = addMs(now(), RESERVATION_MS).toISOString();
  submissionUpdate(tx, sub, 'retry_pending', c, { set: ['reserved_until = :ru'], values: { ':ru': until } });
  tx.create('reservation', reservationItem({ job_id: sub.job_id, worker_id: sub.worker_id, submission_id: sub.id, slots: 0, phase: 'retry', reserved_until: until }));
  // Only while the job takes submissions: a cancel committing after the job was read fails this
  // (label 'job'), and the retry reads the job again and rejects instead.
  tx.check('job', keys.job(sub.job_id), {
    condition: '#s IN (:js1, :js2, :js3)',
    names: { '#s': 'status' },
    values: { ':js1': ACTIVE_STATUSES[0], ':js2': ACTIVE_STATUSES[1], ':js3': ACTIVE_STATUSES[2] },
  });
  scoredEvent(tx, sub, 'retry_pending', c);
  verdictAudit(tx, sub, 'submission.retry_pending', { ai_star_rating: c.stars });
  await tx.commit();
  return 'retry_pending';
}
