/**
 * Builds one export (the `exports` queue consumer's work, D73): claims it (pending → running),
 * streams the chosen format to the bucket as a multipart upload (shared/storage/stream-upload.ts,
 * so memory stays bounded by a few parts whatever the job's size), then records the
 * outcome with its event in one transaction: succeeded + `export.completed`, or failed +
 * `export.failed`.
 *
 * Delivery is at-least-once: a finished export is left alone; a run that died mid-way (a crash or
 * a time-out) is run again from the start over the same object key, and after MAX_ATTEMPTS runs
 * it is marked failed instead of being tried forever.
 */
import { paginateQuery } from '@aws-sdk/lib-dynamodb';
import { db, tableName } from '../db/client';
import { keys, indexKeys } from '../db/keys';
import { Tx } from '../db/tx';
import { nowIso } from '../clock';
import { emit } from '../outbox';
import { ConditionFailed } from '../errors';
import { logger } from '../logger';
import { encoder, type Counter } from './formats';
import { exportContentType, exportObjectKey, getExportItem, type ExportError, type ExportItem } from './model';
import { putObjectStream } from '../storage/s3';

/** Runs of one export before it is marked failed (a run that crashed or timed out counts). */
export const MAX_ATTEMPTS = 2;
/** Multipart part size (S3's minimum) and parts in flight: peak buffered output ≈ 3 × 5 MiB. */
export const PART_SIZE = 5 * 1024 * 1024;
const QUEUE_SIZE = 2;
/** Files read per DynamoDB query page. */
const PAGE_SIZE = 100;

/** The job's Files with ai_star_rating ≥ min_score, oldest first, one page at a time. */
function filePages(jobId: string, minScore: number) {
  return async function* (): AsyncGenerator<Record<string, unknown>[]> {
    const ix = indexKeys.jobFiles(jobId);
    const pages = paginateQuery(
      { client: db(), pageSize: PAGE_SIZE },
      {
        TableName: tableName(),
        IndexName: ix.index,
        KeyConditionExpression: 'GSI1PK = :pk',
        FilterExpression: 'ai_star_rating >= :ms',
        ExpressionAttributeValues: { ':pk': ix.pk, ':ms': minScore },
        ScanIndexForward: true,
      },
    );
    for await (const page of pages) if (page.Items?.length) yield page.Items;
  };
}

export type BuildOutcome = 'succeeded' | 'failed' | 'already_done' | 'missing';

export async function buildExport(exportId: string): Promise<BuildOutcome> {
  const item = await getExportItem(exportId);
  if (!item) {
    logger.warn('export: no such export; message dropped', { export_id: exportId });
    return 'missing';
  }
  if (item.status === 'succeeded' || item.status === 'failed') return 'already_done';
  if ((item.attempts ?? 0) >= MAX_ATTEMPTS) {
    await finishFailed(item, { code: 'export_timed_out', message: 'Building the export did not finish; create a new export to try again.' });
    return 'failed';
  }
  const running = await claim(item);
  const count: Counter = { files: 0 };
  let sizeBytes = 0;
  const key = exportObjectKey(running);
  try {
    const chunks = encoder(running.format, running, filePages(running.job_id, Number(running.min_score)), count);
    ({ sizeBytes } = await putObjectStream(key, exportContentType(running.format), chunks, { partSize: PART_SIZE, queueSize: QUEUE_SIZE }));
  } catch (err) {
    logger.error('export: writing failed', { export_id: exportId, error: err as Error });
    await finishFailed(running, { code: 'export_failed', message: 'Writing the export failed; create a new export to try again.' });
    return 'failed';
  }
  await finishSucceeded(running, { fileCount: count.files, sizeBytes, key });
  return 'succeeded';
}

/** pending → running (or running again after a run that died), counting the attempt. */
async function claim(item: ExportItem): Promise<ExportItem> {
  const at = nowIso();
  const attempts = (item.attempts ?? 0) + 1;
  const tx = new Tx().update('export', keys.export(item.id), 'SET #s = :r, attempts = :a, started_at = :t, updated_at = :t', {
    condition: '#s IN (:p, :r) AND (attribute_not_exists(attempts) OR attempts = :prev)',
    names: { '#s': 'status' },
    values: { ':r': 'running', ':p': 'pending', ':a': attempts, ':t': at, ':prev': item.attempts ?? 0 },
  });
  await tx.commit(); // ConditionFailed: another run claimed it meanwhile; the message is retried
  return { ...item, status: 'running', attempts, started_at: at, updated_at: at };
}

const eventData = (e: ExportItem, fileCount: number | null) => ({ export_id: e.id, job_id: e.job_id, format: e.format, file_count: fileCount });

async function finishSucceeded(e: ExportItem, r: { fileCount: number; sizeBytes: number; key: string }): Promise<void> {
  const at = nowIso();
  const tx = new Tx().update(
    'export',
    keys.export(e.id),
    'SET #s = :ok, file_count = :n, size_bytes = :b, object_key = :k, completed_at = :t, updated_at = :t',
    { condition: '#s = :r AND attempts = :a', names: { '#s': 'status' }, values: { ':ok': 'succeeded', ':n': r.fileCount, ':b': r.sizeBytes, ':k': r.key, ':t': at, ':r': 'running', ':a': e.attempts } },
  );
  emit(tx, { orgId: e.org_id, env: e.environment, type: 'export.completed', jobId: e.job_id, data: eventData(e, r.fileCount) });
  await commitOnce(tx, e.id);
}

/** Marks the export failed with its event; from pending or running, once. */
export async function finishFailed(e: ExportItem, error: ExportError): Promise<void> {
  const at = nowIso();
  const tx = new Tx().update('export', keys.export(e.id), 'SET #s = :f, #err = :e, completed_at = :t, updated_at = :t', {
    condition: '#s IN (:p, :r)',
    names: { '#s': 'status', '#err': 'error' },
    values: { ':f': 'failed', ':e': error, ':t': at, ':p': 'pending', ':r': 'running' },
  });
  emit(tx, { orgId: e.org_id, env: e.environment, type: 'export.failed', jobId: e.job_id, data: eventData(e, null) });
  await commitOnce(tx, e.id);
}

/** A failed condition means another run already recorded an outcome: nothing to do (logged). */
async function commitOnce(tx: Tx, exportId: string): Promise<void> {
  try {
    await tx.commit();
  } catch (err) {
    if (!(err instanceof ConditionFailed)) throw err;
    logger.info('export: outcome already recorded by another run', { export_id: exportId });
  }
}
