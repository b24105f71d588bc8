/**
 * Dataset exports (D73): the stored item and the `export` object.
 *
 * One item per export (`keys.export`, listed per job through `gsi.export`), written pending by the
 * create route, moved to running and then to succeeded or failed by the `exports` consumer, each
 * move conditioned on the status it leaves and carrying its event (outbox) in the same
 * transaction. The bytes live in the bucket under `exports/<export id>/<attempt>/`, one object per
 * run; `object_key` names the one the succeeded run wrote. The download URL is signed fresh on
 * every read and is never stored.
 */
import { GetCommand } from '@aws-sdk/lib-dynamodb';
import { db, tableName } from '../db/client';
import { keys } from '../db/keys';
import { BUCKET_PREFIXES } from '../manifest/wiring';
import { signDownloadUrl } from '../cdn';
import { now } from '../clock';
import type { Env } from '../types';

export const EXPORT_FORMATS = ['jsonl', 'coco', 'csv'] as const;
export type ExportFormat = (typeof EXPORT_FORMATS)[number];
export type ExportStatus = 'pending' | 'running' | 'succeeded' | 'failed';
export const TERMINAL_EXPORT_STATUSES: readonly ExportStatus[] = ['succeeded', 'failed'];

export interface ExportError {
  code: string;
  message: string;
}

export interface ExportItem {
  id: string;
  org_id: string;
  environment: Env;
  job_id: string;
  format: ExportFormat;
  /** Files with ai_star_rating ≥ min_score are exported (as in the files list). */
  min_score: number;
  status: ExportStatus;
  /** Runs of the consumer that claimed it (a run that died mid-way is retried, then failed). */
  attempts: number;
  file_count: number | null;
  size_bytes: number | null;
  object_key: string | null;
  error: ExportError | null;
  created_at: string;
  updated_at: string;
  started_at: string | null;
  completed_at: string | null;
}

const CONTENT_TYPES: Record<ExportFormat, string> = {
  jsonl: 'application/x-ndjson',
  coco: 'application/json',
  csv: 'text/csv; charset=utf-8',
};
const EXTENSIONS: Record<ExportFormat, string> = { jsonl: 'jsonl', coco: 'json', csv: 'csv' };

export const exportContentType = (f: ExportFormat) => CONTENT_TYPES[f];

/** The name the download is saved under, e.g. `job_…-exp_….coco.json`. */
export const exportFilename = (e: Pick<ExportItem, 'id' | 'job_id' | 'format'>) =>
  `${e.job_id}-${e.id}${e.format === 'coco' ? '.coco' : ''}.${EXTENSIONS[e.format]}`;

/**
 * Bucket key of the bytes one run of an export writes: `exports/<export id>/<attempt>/<file name>`.
 * Each run has its own object, so a superseded run still writing can never replace or mix with
 * the file the current run records (the lifecycle rule on `exports/` keeps and deletes them all alike).
 */
export const exportObjectKey = (e: Pick<ExportItem, 'id' | 'job_id' | 'format' | 'attempts'>) =>
  `${BUCKET_PREFIXES.exports}${e.id}/${e.attempts ?? 0}/${exportFilename(e)}`;

/**
 * How long an export's file is kept: the bucket's lifecycle deletes `exports/` objects this many
 * days after they were written (lib/data.ts), at the earliest. Counted here from the export's
 * creation, which comes before its file was written.
 */
export const EXPORT_RETENTION_DAYS = 30;

/** When the export's file may be gone; no download link lasts past it (D60). */
export const exportKeptUntil = (e: Pick<ExportItem, 'created_at'>) => new Date(Date.parse(e.created_at) + EXPORT_RETENTION_DAYS * 86_400_000);

/**
 * The `export` object (D73); the URL fields are null until the export succeeded, and again once its
 * file's retention has ended (a link is never handed out to bytes that may be gone).
 */
export async function presentExport(e: ExportItem) {
  const keptUntil = exportKeptUntil(e);
  const url =
    e.status === 'succeeded' && e.object_key && now().getTime() < keptUntil.getTime() - 1000
      ? await signDownloadUrl(e.object_key, { filename: exportFilename(e), notAfter: keptUntil })
      : null;
  return {
    object: 'export' as const,
    id: e.id,
    job_id: e.job_id,
    format: e.format,
    status: e.status,
    file_count: e.file_count ?? null,
    size_bytes: e.size_bytes ?? null,
    download_url: url?.url ?? null,
    download_url_expires_at: url?.expires_at ?? null,
    error: e.error ?? null,
    created_at: e.created_at,
    completed_at: e.completed_at ?? null,
  };
}

/** The export item (strongly consistent unless asked otherwise). */
export async function getExportItem(id: string, consistent = true): Promise<ExportItem | undefined> {
  const out = await db().send(new GetCommand({ TableName: tableName(), Key: keys.export(id), ConsistentRead: consistent }));
  return out.Item as ExportItem | undefined;
}
