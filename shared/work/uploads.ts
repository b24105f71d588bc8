/**
 * Uploads (D24, D25). Two ways in, one way on: the bytes land in S3 under `uploads/` and the S3
 * ObjectCreated event starts the pipeline (D54).
 *
 * - Direct: `multipart/form-data` through the API, at most 4 MiB in all (D61, ./upload-limits.ts:
 *   a deployed Lambda takes 6 MB and the body arrives base64-encoded); larger bodies answer 413
 *   `use_presigned_upload` before anything is read or written. Every
 *   D25 check (type by magic bytes against the declared type and the job's formats, size by
 *   category, file count) runs on the bytes BEFORE anything is written, so a refused upload is a
 *   400 `validation_error` that leaves nothing behind. Then: plan (new round + file ids on the
 *   submission) → PutObject → complete (awaiting_upload → pending_score, slots reserved → pending).
 * - Pre-signed: JSON `{files:[{filename, content_type, size_bytes}]}` (large files, the deployed
 *   path for big video): declared type and size are checked, the plan is written, and each file
 *   gets a PUT URL whose Content-Length and Content-Type are signed (S3 refuses another size).
 *   The magic bytes are checked by the scoring stage when the object lands; a refused object is
 *   deleted and reported on the submission (`upload_errors`), which stays `awaiting_upload`. The
 *   pipeline completes the upload once every planned object is there.
 *
 * The same functions serve the D27 retry (`mode: 'retry'`): a `retry_pending` submission takes one
 * new upload within its retry window, with at most the files it already holds slots for.
 *
 * The HTTP side (the request schemas, multipart parsing, which way in) is ./upload-request.ts, so
 * what uploads files without HTTP (the sandbox) carries neither zod nor the multipart parser.
 */
import { randomBytes } from 'node:crypto';
import { keys } from '../db/keys';
import { Tx } from '../db/tx';
import { newId } from '../ids';
import { now, nowIso } from '../clock';
import { ConditionFailed, errors, type ErrorDetail } from '../errors';
import { logger } from '../logger';
import type { MutationContext } from '../context';
import { batchGetConsistent, keyId } from '../db/batch-get';
import { ACTIVE_STATUSES, type JobItem } from '../jobs/model';
import { MAX_SIZE_BYTES, categoryOf, normalizeContentType } from '../media/sniff';
import { checkUpload } from '../media/upload-check';
import { objectKeys, presignUploads, putObject, roundKeyframeKeys, roundObjectKeys, tagUndelivered, tagVerdict } from '../storage/s3';
import { reservationKey, type ReservationItem } from './reservations';
import type { DeviceFields, PlannedUpload, SubmissionItem } from './model';
import type { PresignRequest } from './upload-request';
import { completeUpload } from './complete-upload';

export { completeUpload, completeIfAllLanded } from './complete-upload';

export type UploadMode = 'upload' | 'retry';

export interface IncomingFile {
  filename: string;
  contentType: string;
  data: Buffer;
}

const newRound = () => randomBytes(6).toString('hex');

const conflict = (message: string, code: string) => errors.conflict(message, [{ field: 'submission_id', message, code }]);

/** The reservation (phase upload) or retry window (phase retry) an upload of `sub` must hold, still running. */
function jobTakesFiles(job: JobItem) {
  if (!ACTIVE_STATUSES.includes(job.status)) {
    throw errors.conflict(`This job is ${job.status} and takes no more files.`, [{ field: 'job_id', message: `job is ${job.status}`, code: `job_${job.status}` }]);
  }
}

/**
 * The reservation (phase upload) or retry window (phase retry) an upload of `sub` must hold, still
 * running, and the job: one strongly consistent BatchGetItem.
 */
async function activeWindow(sub: SubmissionItem, mode: UploadMode): Promise<{ w: ReservationItem; job: JobItem }> {
  if (mode === 'upload' && sub.status !== 'awaiting_upload') {
    throw conflict(
      sub.status === 'retry_pending' ? 'This submission waits for a retry: use /retry.' : `This submission is ${sub.status}; it takes no upload.`,
      `submission_${sub.status}`,
    );
  }
  if (mode === 'retry' && (sub.status !== 'retry_pending' || Number(sub.attempt) !== 1)) {
    throw conflict(`Only a retry_pending submission can be retried; this one is ${sub.status}.`, `submission_${sub.status}`);
  }
  const windowKey = mode === 'retry' ? keys.retryWindow(sub.id) : keys.reservation(sub.job_id, sub.worker_id);
  const jobKey = keys.job(sub.job_id);
  const items = await batchGetConsistent([windowKey, jobKey]);
  const w = items.get(keyId(windowKey)) as ReservationItem | undefined;
  if (!w || w.submission_id !== sub.id || new Date(w.reserved_until).getTime() <= now().getTime()) {
    throw conflict(mode === 'retry' ? 'The retry window has ended.' : 'The reservation has expired; accept the job again.', 'reservation_expired');
  }
  const job = items.get(keyId(jobKey)) as JobItem | undefined;
  if (!job) throw new Error(`job ${sub.job_id} of submission ${sub.id} not found`);
  return { w, job };
}

function maxFiles(sub: SubmissionItem, mode: UploadMode): number {
  return mode === 'retry' ? Number(sub.slots_held ?? sub.files_expected) : Number(sub.files_expected);
}

/** The request's own shape (D42: checked before the reservation and the job): `field` names where the files are. */
function countCheck(n: number, max: number, field: 'file' | 'files') {
  if (n === 0) throw errors.validation(`Send at least one file in the \`${field}\` field.`, [{ field, message: 'no file', code: 'missing_file' }]);
  if (n > max) {
    throw errors.validation(`This submission takes at most ${max} file${max > 1 ? 's' : ''}.`, [
      { field, message: `at most ${max} files`, code: 'too_many_files' },
    ]);
  }
}

/**
 * The submission's media type in the job's summary (by_type): its first round's. A retry in another
 * type (an image retried as a video) stays counted where the submission was counted when it came
 * in, so each type's approved and scored never exceed its total.
 */
const submissionCategory = (sub: SubmissionItem, uploads: PlannedUpload[]) => (sub.status === 'retry_pending' && sub.category) || categoryOf(uploads[0]!.content_type);

/** Writes the plan: a new round, its file ids and keys, empty parts; only while the window holds. */
async function writePlan(sub: SubmissionItem, w: ReservationItem, uploads: PlannedUpload[], round: string, device: DeviceFields) {
  const tx = new Tx();
  const category = submissionCategory(sub, uploads);
  tx.update(
    'submission',
    keys.submission(sub.id),
    `SET #r = :r, uploads = :u, parts = :p, device = :d, category = :c, updated_at = :t${sub.status === 'retry_pending' ? ', retry_round = :r' : ''}`,
    {
      // On the round read, too: a plan another request wrote since (whose bytes may be landing)
      // is never replaced unseen, which would leave its objects untagged.
      condition: `#s = :st AND attempt = :a AND ${sub.round ? '#r = :read' : '(attribute_not_exists(#r) OR attribute_type(#r, :nullType))'}`,
      names: { '#r': 'round', '#s': 'status' },
      values: {
        ...(sub.round ? { ':read': sub.round } : { ':nullType': 'NULL' }),
        ':r': round,
        ':u': uploads,
        ':p': Object.fromEntries(uploads.map((u) => [u.file_id, {}])),
        ':d': device,
        ':c': category,
        ':t': nowIso(),
        ':st': sub.status,
        ':a': Number(sub.attempt),
      },
    },
  );
  tx.check('reservation', reservationKey(w), {
    condition: 'submission_id = :sid AND reserved_until = :ru',
    values: { ':sid': sub.id, ':ru': w.reserved_until },
  });
  try {
    await tx.commit();
  } catch (e) {
    if (e instanceof ConditionFailed) throw conflict('The submission or its reservation changed meanwhile; fetch it and retry.', 'submission_changed');
    throw e;
  }
  // The round this plan replaced (a first attempt's judged bytes, or an earlier plan's) is never
  // delivered now: its objects are tagged for the lifecycle rule.
  await tagUndelivered([...roundObjectKeys(sub), ...roundKeyframeKeys(sub)], { submission_id: sub.id, replaced_round: sub.round });
}

/** POST …/upload or …/retry with multipart/form-data: D25 checks, store, complete. 202 with the submission. */
export async function uploadDirect(ctx: MutationContext, sub: SubmissionItem, mode: UploadMode, files: IncomingFile[], device: DeviceFields) {
  countCheck(files.length, maxFiles(sub, mode), 'file');
  const { w, job } = await activeWindow(sub, mode);
  jobTakesFiles(job);
  const problems: ErrorDetail[] = [];
  const checked = files.map((f, i) => {
    const r = checkUpload({ declaredType: f.contentType, bytesHead: f.data.subarray(0, 1 << 20), bytes: f.data, size: f.data.length, acceptedFormats: job.accepted_formats as string[] });
    if (!r.ok) problems.push(...r.errors.map((d) => ({ ...d, field: files.length > 1 ? `file[${i}]` : 'file' })));
    return r;
  });
  if (problems.length) throw errors.validation(problems[0]!.message, problems); // D25: nothing stored
  const round = newRound();
  const uploads: PlannedUpload[] = files.map((f, i) => {
    const fileId = newId('file');
    const ct = (checked[i] as { contentType: string }).contentType;
    return { file_id: fileId, key: objectKeys.upload(sub.id, round, fileId, ct), filename: cleanName(f.filename), content_type: ct, size_bytes: f.data.length, mode: 'direct' };
  });
  await writePlan(sub, w, uploads, round, device);
  try {
    await Promise.all(uploads.map((u, i) => putObject(u.key, files[i]!.data, u.content_type)));
  } catch (err) {
    // The bytes that did land never reach a verdict (the round stays awaiting its upload): tagged for the
    // lifecycle rule, as a rejection's are. The route may tag upload objects, not delete them.
    await tagVerdict(uploads.map((u) => u.key), 'rejected').catch(() => undefined);
    throw err;
  }
  // What was read and written so far is the state the completion starts from (no re-read).
  const planned: SubmissionItem = { ...sub, round, uploads, parts: Object.fromEntries(uploads.map((u) => [u.file_id, {}])), device, category: submissionCategory(sub, uploads) };
  const done = await completeUpload(ctx, sub.id, round, { checkObjects: false, known: { sub: planned, window: w, job } });
  if (!done) throw errors.internal();
  return done;
}

/** POST …/upload or …/retry with JSON: pre-signed PUT URLs (D24, D45: 200 `{uploads:[…]}`). */
export async function uploadPresigned(ctx: MutationContext, sub: SubmissionItem, mode: UploadMode, req: PresignRequest) {
  countCheck(req.files.length, maxFiles(sub, mode), 'files');
  const { w, job } = await activeWindow(sub, mode);
  jobTakesFiles(job);
  const accepted = new Set((job.accepted_formats as string[]).map((f) => normalizeContentType(f)));
  const problems: ErrorDetail[] = [];
  req.files.forEach((f, i) => {
    const field = `files.${i}`;
    const ct = normalizeContentType(f.content_type);
    if (!ct || !accepted.has(ct)) {
      problems.push({ field: `${field}.content_type`, code: 'unsupported_format', message: `Content type ${f.content_type} is not accepted by this job.` });
    } else if (f.size_bytes > MAX_SIZE_BYTES[categoryOf(ct)!]) {
      problems.push({ field: `${field}.size_bytes`, code: 'file_too_large', message: `The ${categoryOf(ct)} limit is ${MAX_SIZE_BYTES[categoryOf(ct)!]} bytes.` });
    }
  });
  if (problems.length) throw errors.validation(problems[0]!.message, problems);
  const round = newRound();
  const uploads: PlannedUpload[] = req.files.map((f) => {
    const fileId = newId('file');
    const ct = normalizeContentType(f.content_type)!;
    return { file_id: fileId, key: objectKeys.upload(sub.id, round, fileId, ct), filename: cleanName(f.filename), content_type: ct, size_bytes: f.size_bytes, mode: 'presigned' };
  });
  const { files: _files, ...device } = req;
  // Signed before the plan is written: a signing failure (STS) then changes nothing. The URLs expire
  // with the reservation (or retry window): bytes landing later could not complete it.
  const signed = await presignUploads(uploads.map((u) => ({ key: u.key, contentType: u.content_type, sizeBytes: u.size_bytes })), new Date(w.reserved_until)).catch((err: unknown) => {
    // The upload-signing role could not be assumed (STS throttled or unreachable): nothing was
    // written, so the same request may simply be sent again.
    logger.error('upload URLs could not be signed', { error: err as Error, submission_id: sub.id });
    throw errors.unavailable('The upload URLs could not be signed right now; nothing was stored. Send the same request again in a few seconds.', 'upload_signing_unavailable', 5);
  });
  await writePlan(sub, w, uploads, round, device);
  const body = {
    object: 'upload_instructions' as const,
    submission_id: sub.id,
    uploads: uploads.map((u, i) => ({ file_id: u.file_id, filename: u.filename, ...signed[i]! })),
  };
  // The idempotency middleware stores this response after the fact (the plan wrote no money).
  void ctx;
  return body;
}

/** Path separators and control characters become `_`; the last 255 characters are kept (whole code points: never half an emoji). */
const cleanName = (name: string) => Array.from(name.replace(/[\\/\x00-\x1f]/g, '_')).slice(-255).join('') || 'upload';
