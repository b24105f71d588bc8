/**
 * Files (spec "File", D29, D30, D54): one immutable item per approved uploaded file, created in the
 * approval transaction with its measured metadata and its annotations, never updated afterwards.
 * Download URLs are never stored: every listing signs fresh 7-day CDN URLs for the file and its
 * keyframes (D60, shared/cdn); refresh_url signs the primary only (D30).
 */
import { keys, gsi, indexKeys } from '../db/keys';
import { queryPage, listBody } from '../db/query';
import { binding } from '../cursor';
import { signDownloadUrl } from '../cdn';
import { timeLeftMs } from '../invocation-deadline';
import type { FilePart, PlannedUpload, SubmissionItem } from '../work/model';

type Item = Record<string, unknown>;

export interface FileKeyframe {
  index: number;
  timestamp_seconds: number | null;
  width: number | null;
  height: number | null;
  key: string;
  perceptual_hash?: string | null;
}

/** The File item for one approved upload (written once, in the approval transaction). */
export function fileItem(sub: SubmissionItem, upload: PlannedUpload, part: FilePart, stars: number, createdAt: string) {
  const m = (part.metadata ?? {}) as Record<string, unknown>;
  return {
    ...keys.file(upload.file_id),
    ...gsi.file(sub.job_id, upload.file_id, createdAt),
    entity: 'file',
    id: upload.file_id,
    org_id: sub.org_id,
    environment: sub.environment,
    job_id: sub.job_id,
    submission_id: sub.id,
    worker_id: sub.worker_id,
    object_key: upload.key,
    original_filename: upload.filename,
    content_type: (m.content_type as string) ?? upload.content_type,
    size_bytes: Number(m.size_bytes ?? upload.size_bytes),
    duration_seconds: (m.duration_seconds as number | null) ?? null,
    width: (m.width as number | null) ?? null,
    height: (m.height as number | null) ?? null,
    // Not shown on the File: the COCO export turns width and height upright with it.
    orientation: (m.orientation as number | null | undefined) ?? null,
    content_hash: m.content_hash as string,
    captured_at: (m.captured_at as string | null) ?? null,
    device_info: {
      device_model: (m.device_model as string | null) ?? null,
      device_os: (m.device_os as string | null) ?? null,
      app_version: (m.app_version as string | null) ?? null,
    },
    worker_region: part.worker_region ?? null,
    ai_star_rating: stars,
    annotations: part.annotations ?? null,
    keyframes: part.keyframes ?? null,
    perceptual_hash: part.perceptual_hash ?? null,
    location_verified: part.location_verified ?? null,
    created_at: createdAt,
  };
}

/** The File object with fresh 7-day URLs (D30). */
export async function presentFile(f: Item) {
  const [main, keyframes] = await Promise.all([
    signDownloadUrl(f.object_key as string, { filename: f.original_filename as string }),
    Array.isArray(f.keyframes)
      ? Promise.all(
          (f.keyframes as FileKeyframe[]).map(async (k) => {
            const u = await signDownloadUrl(k.key, { filename: `${f.id as string}-keyframe-${k.index}.png` });
            return {
              index: k.index,
              timestamp_seconds: k.timestamp_seconds ?? null,
              width: k.width ?? null,
              height: k.height ?? null,
              perceptual_hash: k.perceptual_hash ?? null,
              download_url: u.url,
              download_url_expires_at: u.expires_at,
            };
          }),
        )
      : Promise.resolve(null),
  ]);
  return {
    object: 'file' as const,
    id: f.id as string,
    job_id: f.job_id as string,
    submission_id: f.submission_id as string,
    original_filename: f.original_filename as string,
    content_type: f.content_type as string,
    size_bytes: Number(f.size_bytes),
    duration_seconds: (f.duration_seconds as number | null) ?? null,
    width: (f.width as number | null) ?? null,
    height: (f.height as number | null) ?? null,
    content_hash: f.content_hash as string,
    captured_at: (f.captured_at as string | null) ?? null,
    ai_star_rating: Number(f.ai_star_rating),
    device_info: f.device_info as object,
    worker_region: (f.worker_region as string | null) ?? null,
    perceptual_hash: (f.perceptual_hash as string | null | undefined) ?? null,
    location_verified: (f.location_verified as boolean | null | undefined) ?? null,
    download_url: main.url,
    download_url_expires_at: main.expires_at,
    annotations: (f.annotations as object | null) ?? null,
    keyframes,
    created_at: f.created_at as string,
  };
}

/**
 * How long the first page of a job's files waits, at most, for the job's file index to take in
 * the files the job had approved when the request read it (pauses before each new read).
 */
const INDEX_CATCH_UP_PAUSES_MS = [100, 200, 300, 400, 500];
/** What a route keeps after its last read to sign the URLs and answer. */
const MIN_TIME_TO_ANSWER_MS = 2_000;

/**
 * GET /v1/jobs/{id}/files (pattern 29): approved files with ai_star_rating ≥ min_score (default 3).
 *
 * The files are listed from an index, which takes in a write asynchronously: just after the job
 * completes, the last file approved may not be in it yet. When the first page reads the whole list
 * (a job of up to a page of files or so), it counts the files the index holds against the job's
 * `files_approved`, read strongly consistent by the route before it, and reads again after a short
 * pause while the index holds fewer (at most 1.5 s, and never past the invocation's deadline). So
 * a buyer who saw the job completed then lists every one of its files. A longer list, or a later
 * page, is as the index shows it.
 */
export async function listFilesForJob(job: Item, q: { min_score: number; limit: number; cursor?: string }) {
  const jobId = job.id as string;
  const ix = indexKeys.jobFiles(jobId);
  const read = () =>
    queryPage<Item>({
      index: ix.index,
      pk: ix.pk,
      limit: q.limit,
      cursor: q.cursor,
      filter: { expression: 'ai_star_rating >= :ms', values: { ':ms': q.min_score } },
      binding: binding({ what: 'job_files', job: jobId, min_score: q.min_score }),
    });
  const approved = Number(job.files_approved ?? 0);
  let page = await read();
  for (const pause of INDEX_CATCH_UP_PAUSES_MS) {
    if (page.partitionCount === null || page.partitionCount >= approved || timeLeftMs() < pause + MIN_TIME_TO_ANSWER_MS) break;
    await new Promise((r) => setTimeout(r, pause));
    page = await read();
  }
  return listBody(await Promise.all(page.items.map(presentFile)), page);
}

/** POST /v1/files/{id}/refresh_url (D30): the primary URL only. */
export async function refreshFileUrl(f: Item) {
  const u = await signDownloadUrl(f.object_key as string, { filename: f.original_filename as string });
  return { object: 'file_url' as const, id: f.id as string, download_url: u.url, download_url_expires_at: u.expires_at };
}

/** The buyer's `file_url` of a submission: the first File's download URL once approved, else null (unpaid bytes are not handed out). */
export async function approvedFileUrl(s: SubmissionItem): Promise<string | null> {
  if (s.status !== 'approved' || !s.uploads?.length) return null;
  const u = s.uploads[0]!;
  return (await signDownloadUrl(u.key, { filename: u.filename })).url;
}
