/**
 * Builds one export (the `exports` queue consumer's work, D73): claims it (pending → running),
 * streams the chosen format to the bucket as a multipart upload (shared/storage/stream-upload.ts,
 * so memory stays bounded by a few parts whatever the job's size), then records the
 * outcome with its event in one transaction: succeeded + `export.completed`, or failed +
 * `export.failed`.
 *
 * Delivery is at-least-once (the table-stream pipe, EventBridge and SQS may each deliver twice), so
 * one export may be asked for while a run of it is still going:
 * - a finished export is left alone;
 * - a `running` export whose run started less than RUN_LEASE_MS ago (the consumer's time-out plus a
 *   margin) may still be alive: the message is handed back (ExportRunInProgress), never a second
 *   run beside the first;
 * - a run older than that is dead (Lambda ended it at the time-out): it is run again from the
 *   start, and after MAX_ATTEMPTS runs the export is marked failed instead of being tried forever;
 * - each run writes its own object (exportObjectKey carries the attempt) and records its outcome
 *   only while it is still the current attempt, so a superseded run that wakes up late can neither
 *   overwrite the file the current run described nor record an outcome over it.
 */
import { GetCommand, paginateQuery } from '@aws-sdk/lib-dynamodb';
import { db, tableName } from '../db/client';
import { keys, indexKeys } from '../db/keys';
import { Tx } from '../db/tx';
import { now, nowIso } from '../clock';
import { emit } from '../outbox';
import { ConditionFailed } from '../errors';
import { logger } from '../logger';
import { encoder, type Counter } from './formats';
import { exportContentType, exportObjectKey, getExportItem, type ExportError, type ExportItem } from './model';
import { putObjectStream } from '../storage/s3';
import { queueByName } from '../manifest/wiring';
import { RetryLater } from '../work/stage-message';

/** Runs of one export before it is marked failed (a run that crashed or timed out counts). */
export const MAX_ATTEMPTS = 2;
/** Multipart part size (S3's minimum) and parts in flight: peak buffered output ≈ 3 × 5 MiB. */
export const PART_SIZE = 5 * 1024 * 1024;
const QUEUE_SIZE = 2;
/** Files read per DynamoDB query page. */
const PAGE_SIZE = 100;
/**
 * How long after its claim a run may still be alive: the exports consumer's time-out (Lambda ends
 * the run there) plus a margin for clock differences between invocations. A genuine redelivery
 * after a crash or a time-out comes after the queue's visibility timeout (6 × the consumer's), well
 * past this, so only a duplicate delivery can find a run this young.
 */
export const RUN_LEASE_MS = (queueByName('exports').consumerTimeoutSeconds + 60) * 1000;

/**
 * A message for an export whose run is still alive. Thrown, not acknowledged: the live run is not
 * guaranteed to record an outcome (it may yet crash or time out), so the message must come back.
 * The exports consumer reports it as a failed message, which SQS makes visible again after the
 * queue's visibility timeout (3600 s, past RUN_LEASE_MS): by then the run has recorded its outcome
 * (the message finds it done) or is dead (the message takes over, or fails it after MAX_ATTEMPTS).
 * A RetryLater, so a consumer that backs off on RetryLater treats it as a wait, not an error.
 */
export class ExportRunInProgress extends RetryLater {
  constructor(exportId: string, attempt: number) {
    super(`export ${exportId}: run ${attempt} is still in progress; message handed back`);
    this.name = 'ExportRunInProgress';
  }
}

/** A running export whose current run may still be alive (claimed less than RUN_LEASE_MS ago). */
function runMayBeAlive(item: ExportItem): boolean {
  if (item.status !== 'running' || !item.started_at) return false;
  return now().getTime() - Date.parse(item.started_at) < RUN_LEASE_MS;
}

/**
 * Builds of one run while the job's index and its count of approved files disagree. The index is
 * eventually consistent (DynamoDB Local's is not): a File approved a moment before the build may
 * not be listed yet, and one an override withdrew may still be. Such a build is made again, to the
 * same object, after INDEX_LAG_WAIT_MS; a disagreement that outlasts the passes (approvals still
 * arriving) keeps the last build, which holds the files approved while it was built.
 */
export const INDEX_PASSES = 3;
const INDEX_LAG_WAIT_MS = 1000;

/** The job's count of approved Files, read strongly consistent (null: no such job). */
async function filesApproved(jobId: string): Promise<number | null> {
  const out = await db().send(new GetCommand({ TableName: tableName(), Key: keys.job(jobId), ConsistentRead: true, ProjectionExpression: 'files_approved' }));
  return out.Item ? Number(out.Item.files_approved ?? 0) : null;
}

/**
 * The job's Files with ai_star_rating ≥ min_score, oldest first, one page at a time; `listed`
 * counts every File the index returned before the filter.
 */
function filePages(jobId: string, minScore: number, listed: { files: number }) {
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
    listed.files = 0; // a format may read the pages more than once (COCO: it checks that both readings agree); count the last
    for await (const page of pages) {
      listed.files += page.ScannedCount ?? 0;
      if (page.Items?.length) yield page.Items;
    }
  };
}

/** `superseded`: this run's outcome was not recorded, another run took the export over or finished it. */
export type BuildOutcome = 'succeeded' | 'failed' | 'already_done' | 'missing' | 'superseded';

export async function buildExport(exportId: string): Promise<BuildOutcome> {
  const item = await getExportItem(exportId);
  if (!item) {
    logger.warn('export: no such export; message dropped', { export_id: exportId });
    return 'missing';
  }
  if (item.status === 'succeeded' || item.status === 'failed') return 'already_done';
  if (runMayBeAlive(item)) throw new ExportRunInProgress(item.id, item.attempts ?? 0);
  if ((item.attempts ?? 0) >= MAX_ATTEMPTS) {
    const recorded = await finishFailed(item, { code: 'export_timed_out', message: 'Building the export did not finish; create a new export to try again.' });
    return recorded ? 'failed' : 'superseded';
  }
  const running = await claim(item);
  let count: Counter = { files: 0 };
  let sizeBytes = 0;
  const key = exportObjectKey(running);
  try {
    for (let pass = 1; ; pass++) {
      count = { files: 0 };
      const listed = { files: 0 };
      const approved = await filesApproved(running.job_id);
      const chunks = encoder(running.format, running, filePages(running.job_id, Number(running.min_score), listed), count);
      ({ sizeBytes } = await putObjectStream(key, exportContentType(running.format), chunks, { partSize: PART_SIZE, queueSize: QUEUE_SIZE }));
      const consistent = !count.changedBetweenReadings;
      if (approved === null || (listed.files === approved && consistent)) break;
      if (pass >= INDEX_PASSES) {
        logger.warn('export: the job index still disagrees with its approved count; keeping the last build', { export_id: exportId, listed: listed.files, approved, consistent });
        break;
      }
      logger.info('export: the job index lags its approved count, or changed while it was read; building again', { export_id: exportId, listed: listed.files, approved, consistent, pass });
      await new Promise((r) => setTimeout(r, INDEX_LAG_WAIT_MS));
    }
  } catch (err) {
    logger.error('export: writing failed', { export_id: exportId, error: err as Error });
    const recorded = await finishFailed(running, { code: 'export_failed', message: 'Writing the export failed; create a new export to try again.' });
    return recorded ? 'failed' : 'superseded';
  }
  const recorded = await finishSucceeded(running, { fileCount: count.files, sizeBytes, key });
  return recorded ? 'succeeded' : 'superseded';
}

/**
 * The condition that the item is still at `attempt` (the run that read or claimed it is current).
 * An item created before attempts were counted has none: that is attempt 0.
 */
const atAttempt = (attempt: number) => (attempt === 0 ? '(attribute_not_exists(attempts) OR attempts = :att)' : 'attempts = :att');

/** pending → running (or running again after a run that died), counting the attempt. */
async function claim(item: ExportItem): Promise<ExportItem> {
  const at = nowIso();
  const prev = item.attempts ?? 0;
  const attempts = prev + 1;
  const tx = new Tx().update('export', keys.export(item.id), 'SET #s = :r, attempts = :a, started_at = :t, updated_at = :t', {
    condition: `#s IN (:p, :r) AND ${atAttempt(prev)}`,
    names: { '#s': 'status' },
    values: { ':r': 'running', ':p': 'pending', ':a': attempts, ':t': at, ':att': prev },
  });
  try {
    await tx.commit();
  } catch (err) {
    // Another delivery claimed it (or finished it) since it was read: that run has just started.
    if (err instanceof ConditionFailed) throw new ExportRunInProgress(item.id, attempts);
    throw err;
  }
  return { ...item, status: 'running', attempts, started_at: at, updated_at: at };
}

const eventData = (e: ExportItem, fileCount: number | null) => ({ export_id: e.id, job_id: e.job_id, format: e.format, file_count: fileCount });

async function finishSucceeded(e: ExportItem, r: { fileCount: number; sizeBytes: number; key: string }): Promise<boolean> {
  const at = nowIso();
  const tx = new Tx().update(
    'export',
    keys.export(e.id),
    'SET #s = :ok, file_count = :n, size_bytes = :b, object_key = :k, completed_at = :t, updated_at = :t',
    { condition: `#s = :r AND ${atAttempt(e.attempts ?? 0)}`, names: { '#s': 'status' }, values: { ':ok': 'succeeded', ':n': r.fileCount, ':b': r.sizeBytes, ':k': r.key, ':t': at, ':r': 'running', ':att': e.attempts ?? 0 } },
  );
  emit(tx, { orgId: e.org_id, env: e.environment, type: 'export.completed', jobId: e.job_id, data: eventData(e, r.fileCount) });
  return commitOnce(tx, e.id);
}

/**
 * Marks the export failed with its event; from pending or running, once, and only while `e`'s
 * attempt is still the current one (a superseded run never fails the run that replaced it).
 */
export async function finishFailed(e: ExportItem, error: ExportError): Promise<boolean> {
  const at = nowIso();
  const tx = new Tx().update('export', keys.export(e.id), 'SET #s = :f, #err = :e, completed_at = :t, updated_at = :t', {
    condition: `#s IN (:p, :r) AND ${atAttempt(e.attempts ?? 0)}`,
    names: { '#s': 'status', '#err': 'error' },
    values: { ':f': 'failed', ':e': error, ':t': at, ':p': 'pending', ':r': 'running', ':att': e.attempts ?? 0 },
  });
  emit(tx, { orgId: e.org_id, env: e.environment, type: 'export.failed', jobId: e.job_id, data: eventData(e, null) });
  return commitOnce(tx, e.id);
}

/**
 * A failed condition means another run recorded an outcome or took the export over: this run's
 * outcome is not the export's, nothing to do (logged).
 */
async function commitOnce(tx: Tx, exportId: string): Promise<boolean> {
  try {
    await tx.commit();
    return true;
  } catch (err) {
    if (!(err instanceof ConditionFailed)) throw err;
    logger.info('export: outcome not recorded: another run took the export over or already finished it', { export_id: exportId });
    return false;
  }
}
