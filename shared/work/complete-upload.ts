/**
 * Completing an upload round (D24, D27, D54): awaiting_upload → pending_score (or the retry's
 * retry_pending → pending_score) in one transaction with the job's slot counters, the reservation,
 * the audit record and the idempotent response; and the fan-in when both stages finished first.
 * Split from uploads.ts (the routes' checks and plans); the scoring stage completes pre-signed
 * uploads through `completeIfAllLanded`.
 */
import { keys } from '../db/keys';
import { Tx } from '../db/tx';
import { DAY_MS, now, nowIso } from '../clock';
import { audit } from '../audit';
import { ConditionFailed, errors } from '../errors';
import { logger } from '../logger';
import { recordResponse, systemContext, type MutationContext } from '../context';
import { summaryUpdate as summaryClauses } from './summary';
import type { JobItem } from '../jobs/model';
import { categoryOf } from '../media/sniff';
import { headObject } from '../storage/s3';
import { addFreeNeutralMove, addSlotChange, retryContended, withJobRetry } from './slots';
import { getReservation, getRetryWindow, getSubmissionItem, reservationKey, type ReservationItem } from './reservations';
import { presentWorkerSubmission, submissionIndexes, type SubmissionItem } from './model';
import { tryVerdict } from './verdict';
import type { UploadMode } from './uploads';

const conflict = (message: string, code: string) => errors.conflict(message, [{ field: 'submission_id', message, code }]);

/**
 * The upload is complete: awaiting_upload → pending_score (slots reserved → pending, the buyer
 * indexes, `submitted` on the job summary) or, for the retry, retry_pending → pending_score
 * (attempt 2; its slots are already pending). Idempotent: returns the worker view when the round
 * is already past this step; null when `checkObjects` finds a planned object missing or refused.
 * `known`: the submission (as planned), window and job the caller just read, so nothing is read
 * again (a stale job snapshot fails its condition and is read afresh).
 *
 * The fan-in: both stages may have finished before this commit, and then neither saw the
 * submission pending_score. So the completion is first conditioned on the round NOT being ready
 * for a verdict; committed, a stage is still to write and its write's item (stage-write.ts) shows
 * pending_score and both results, so that stage decides. When the condition fails because the
 * round is ready, the upload completes without it and takes the verdict itself; the same commit
 * writes a fan-in item whose insert queues the verdict (stream rule `fan-in-due`), so a verdict
 * that fails here, or a function that stops after the commit, loses nothing.
 */
/** Rounds of a contended neutral completion before it answers 409 (each round is Tx.commit's bounded retries). */
const NEUTRAL_COMPLETION_ROUNDS = 3;

export async function completeUpload(
  ctx: MutationContext,
  subId: string,
  round: string,
  opts: {
    checkObjects: boolean;
    known?: { sub: SubmissionItem; window: ReservationItem; job: JobItem | null };
    /**
     * The pipeline's completion throws a failed verdict, so its message comes back and decides
     * (the scoring stage completes and decides on a redelivery); the upload route logs it.
     */
    throwVerdictFailure?: boolean;
  },
): Promise<ReturnType<typeof presentWorkerSubmission> | null> {
  const since = Date.now(); // the rebuild budgets of every round below (completion, verdict) count from here
  let sub = opts.known?.sub ?? (await getSubmissionItem(subId));
  if (!sub || sub.round !== round) return null;
  if (sub.status !== 'awaiting_upload' && sub.status !== 'retry_pending') return presentWorkerSubmission(sub);
  // When the upload was made: now, or for landed objects when the last of them landed (their URLs
  // expire with the window, so bytes that landed in time complete it even when the pipeline reaches
  // them after the window's end; the sweep leaves such a plan a grace period, release-reservation.ts).
  let madeAt = now().getTime();
  if (opts.checkObjects) {
    if (Object.values(sub.parts ?? {}).some((p) => p.upload_error)) return null;
    const heads = await Promise.all(sub.uploads.map((u) => headObject(u.key)));
    if (heads.some((h) => h === null)) return null;
    // Last-Modified has whole seconds: the latest instant of its second (never earlier than the landing).
    const landed = heads.map((h) => (h!.lastModified ? h!.lastModified.getTime() + 999 : madeAt));
    madeAt = Math.max(...landed);
  }
  const mode: UploadMode = sub.status === 'retry_pending' ? 'retry' : 'upload';
  const w = opts.known?.window ?? (mode === 'retry' ? await getRetryWindow(sub.id) : await getReservation(sub.job_id, sub.worker_id));
  if (!w || w.submission_id !== sub.id || new Date(w.reserved_until).getTime() <= madeAt) {
    throw conflict(mode === 'retry' ? 'The retry window has ended.' : 'The reservation has expired; accept the job again.', 'reservation_expired');
  }
  const n = sub.uploads.length;
  const at = nowIso();
  const cat = sub.category ?? categoryOf(sub.uploads[0]!.content_type)!;
  const from = sub.status;
  const build = async (job: JobItem | null, unlessReady: boolean) => {
    const s = sub!;
    const tx = new Tx();
    tx.delete('reservation', reservationKey(w), {
      condition: 'submission_id = :sid AND reserved_until = :ru',
      values: { ':sid': s.id, ':ru': w.reserved_until },
    });
    if (job) addSlotChange(tx, job, { reserved: -Number(w.slots), pending: n, extra: summaryClauses(cat, 'submitted') });
    else if (mode === 'upload') addFreeNeutralMove(tx, s.job_id, { reserved: -n, pending: n, extra: summaryClauses(cat, 'submitted') });
    const idx = submissionIndexes(s, at).buyer; // listed by submitted_at (this upload's)
    const view = presentWorkerSubmission({
      ...s,
      status: 'pending_score',
      attempt: mode === 'retry' ? 2 : 1,
      submitted_at: at,
      reserved_until: null,
      slots_held: mode === 'retry' ? s.slots_held : n,
    });
    const notReady = unlessReady ? notReadyCondition(s.uploads.map((u) => u.file_id)) : null;
    // The pipeline completes only while no file of the round was refused by its byte check: one
    // refused meanwhile (another file's stage, concurrently) keeps the round open for its new upload.
    const unrefused = opts.checkObjects ? noUploadErrorCondition(s.uploads.map((u) => u.file_id)) : null;
    tx.update(
      'submission',
      keys.submission(s.id),
      `SET #s = :ps, submitted_at = :t, updated_at = :t, reserved_until = :null, attempt = :a, GSI1PK = :g1, GSI1SK = :g1s, GSI2PK = :g2, GSI2SK = :g2s${mode === 'upload' ? ', slots_held = :n' : ''}`,
      {
        // A retry completes only the round its plan installed (a late event of the first round cannot).
        condition: `#s = :from AND #r = :round${mode === 'retry' ? ' AND retry_round = :round' : ''}${notReady ? ` AND ${notReady.condition}` : ''}${unrefused ? ` AND ${unrefused.condition}` : ''}`,
        names: { '#s': 'status', '#r': 'round', ...notReady?.names, ...unrefused?.names },
        values: {
          ':ps': 'pending_score',
          ':t': at,
          ':null': null,
          ':a': mode === 'retry' ? 2 : 1,
          ':g1': idx.GSI1PK,
          ':g1s': idx.GSI1SK,
          ':g2': idx.GSI2PK,
          ':g2s': idx.GSI2SK,
          ':from': from,
          ':round': round,
          ...(mode === 'upload' ? { ':n': n } : {}),
          ...notReady?.values,
        },
      },
    );
    // The round is ready (both stages wrote before this commit), so no stage will decide: the
    // fan-in item queues the verdict in this commit; the verdict below is only the fast path.
    if (!unlessReady) tx.put('fan-in', { ...keys.fanIn(s.id, round), entity: 'fan_in', submission_id: s.id, round, created_at: at, ttl: Math.floor((Date.now() + DAY_MS) / 1000) });
    audit(tx, {
      orgId: s.org_id,
      eventType: mode === 'retry' ? 'submission.retried' : 'submission.submitted',
      actor: ctx.actor,
      env: s.environment,
      resource: { type: 'submission', id: s.id },
      jobId: s.job_id,
      requestId: ctx.requestId,
      data: { files: n, round },
    });
    recordResponse(ctx, tx, view, 202);
    await tx.commit();
    return view;
  };
  // Every reserved slot becomes pending (the usual case): the free slots do not move, so the job
  // update needs no snapshot and concurrent completions and approvals do not fail its condition.
  // Their transactions on the job item still conflict while one is in progress (DynamoDB cancels
  // the other with TransactionConflict), so a contended commit is retried here too.
  const neutral = mode === 'upload' && Number(w.slots) === n;
  // A few rounds of Tx.commit's own retries (about 4 s each at most), well within the route's 28 s.
  const complete = (unlessReady: boolean) =>
    mode === 'upload' && !neutral ? withJobRetry(sub!.job_id, (job) => build(job, unlessReady), undefined, opts.known?.job ?? undefined, since) : retryContended(() => build(null, unlessReady), NEUTRAL_COMPLETION_ROUNDS);
  let view: ReturnType<typeof presentWorkerSubmission>;
  let decideHere = false;
  try {
    try {
      view = await complete(true);
    } catch (e) {
      if (!(e instanceof ConditionFailed && e.reasons.includes('submission'))) throw e;
      // The round may be ready for a verdict already (both stages done): complete without the
      // condition and take the verdict here. Anything else changed: report below.
      const now = await getSubmissionItem(subId);
      if (opts.checkObjects && refusedFile(now)) return null; // a file was refused meanwhile: its new upload completes the round
      if (!now || now.round !== round || now.status !== from) throw e;
      sub = now;
      decideHere = true;
      view = await complete(false);
    }
  } catch (e) {
    if (!(e instanceof ConditionFailed)) throw e;
    // Someone else completed (or ended) it: report the state as it is.
    sub = (await getSubmissionItem(subId))!;
    if (opts.checkObjects && sub.round === round && sub.status === from && refusedFile(sub)) return null;
    if (sub.round === round && sub.status === 'pending_score') return presentWorkerSubmission(sub);
    throw conflict('The reservation ended before the upload completed.', 'reservation_expired');
  }
  if (decideHere) {
    await tryVerdict(subId, since).catch((err: Error) => {
      // The fan-in item committed with the completion brings the verdict through the scoring queue.
      logger.warn('fan-in after upload failed; the queued fan-in takes the verdict', { error: err, submission_id: subId });
      if (opts.throwVerdictFailure) throw err;
    });
  }
  return view;
}

/** No file of the round refused by its byte check (`upload_error`, set by the scoring stage). */
function noUploadErrorCondition(fileIds: string[]): { condition: string; names: Record<string, string> } {
  const names: Record<string, string> = { '#up': 'parts', '#uerr': 'upload_error' };
  const parts = fileIds.map((id, i) => {
    names[`#uf${i}`] = id;
    return `attribute_not_exists(#up.#uf${i}.#uerr)`;
  });
  return { condition: parts.join(' AND '), names };
}

const refusedFile = (s: SubmissionItem | undefined): boolean => Object.values(s?.parts ?? {}).some((p) => p.upload_error);

/**
 * A condition that holds while the files' round is NOT ready for a verdict (verdict-input.ts
 * `readyForVerdict`): no file rejected by a pre-check, and some file without its score or its
 * annotations (null annotations count as written).
 */
function notReadyCondition(fileIds: string[]): { condition: string; names: Record<string, string>; values: Record<string, unknown> } {
  const names: Record<string, string> = { '#pp': 'parts', '#psc': 'score', '#pan': 'annotations', '#ppr': 'precheck_rejected' };
  const noPrecheck: string[] = [];
  const missing: string[] = [];
  fileIds.forEach((id, i) => {
    names[`#pf${i}`] = id;
    noPrecheck.push(`NOT (#pp.#pf${i}.#psc.#ppr = :ptrue)`);
    missing.push(`attribute_not_exists(#pp.#pf${i}.#psc) OR attribute_not_exists(#pp.#pf${i}.#pan)`);
  });
  return { condition: `(${noPrecheck.join(' AND ')}) AND (${missing.join(' OR ')})`, names, values: { ':ptrue': true } };
}

/** Pipeline side of a pre-signed upload: the scoring stage calls this when an object lands. */
export async function completeIfAllLanded(subId: string, round: string): Promise<void> {
  try {
    await completeUpload(systemContext('pipeline'), subId, round, { checkObjects: true, throwVerdictFailure: true });
  } catch (e) {
    if (e instanceof Error && (e as { status?: number }).status === 409) return; // expired meanwhile: the sweep ends it
    throw e;
  }
}
