/**
 * Dataset exports (D73): create (202, then built by the `exports` queue consumer, see build.ts),
 * read with long-poll, and the job's list. Scope `jobs:read`: an export changes no job and no
 * money, it reads the job's Files.
 *
 * The create route sends no message: the table stream carries the new export item to the
 * `exports` queue (pipe `exports-requested` in shared/manifest/wiring.ts), so the commit that
 * accepts an export is also what queues it, and no accepted export can be left pending with
 * nothing to build it (a function that dies after its commit, a queue that refuses a send).
 */
import { keys, gsi, indexKeys } from '../db/keys';
import { Tx } from '../db/tx';
import { queryPage, listBody } from '../db/query';
import { binding } from '../cursor';
import { newId } from '../ids';
import { nowIso } from '../clock';
import { audit } from '../audit';
import { recordResponse, type MutationContext } from '../context';
import { untilStatusChanges } from '../long-poll';
import { getExportItem, presentExport, TERMINAL_EXPORT_STATUSES, type ExportFormat, type ExportItem } from './model';
import type { BuyerPrincipal } from '../types';

export { presentExport, getExportItem };

/**
 * The message the create route used to send to the `exports` queue; the consumer still takes it,
 * so messages queued before the stream pipe replaced it are built too.
 */
export interface BuildMessage {
  kind: 'export.build';
  export_id: string;
}

/** Same default as the files list: Files rated 3 stars or more. */
export const DEFAULT_MIN_SCORE = 3;

export async function createExport(
  ctx: MutationContext,
  p: BuyerPrincipal,
  job: Record<string, unknown>,
  input: { format: ExportFormat; min_score?: number },
) {
  const id = newId('export');
  const at = nowIso();
  const jobId = job.id as string;
  const item: ExportItem = {
    id,
    org_id: p.orgId,
    environment: p.env,
    job_id: jobId,
    format: input.format,
    min_score: input.min_score ?? DEFAULT_MIN_SCORE,
    status: 'pending',
    attempts: 0,
    file_count: null,
    size_bytes: null,
    object_key: null,
    error: null,
    created_at: at,
    updated_at: at,
    started_at: null,
    completed_at: null,
  };
  const view = await presentExport(item);
  const tx = new Tx().create('export', { ...keys.export(id), ...gsi.export(jobId, id), entity: 'export', ...item });
  audit(tx, {
    orgId: p.orgId,
    eventType: 'export.created',
    actor: ctx.actor,
    env: p.env,
    resource: { type: 'export', id },
    jobId,
    requestId: ctx.requestId,
    data: { format: item.format, min_score: item.min_score },
  });
  recordResponse(ctx, tx, view, 202);
  await tx.commit();
  return view;
}

/** GET /v1/jobs/{id}/exports: newest first, paginated like every list (D12). */
export async function listExports(jobId: string, q: { limit: number; cursor?: string }) {
  const ix = indexKeys.jobExports(jobId);
  const page = await queryPage<ExportItem & Record<string, unknown>>({
    index: ix.index,
    pk: ix.pk,
    limit: q.limit,
    cursor: q.cursor,
    binding: binding({ what: 'job_exports', job: jobId }),
  });
  return listBody(await Promise.all(page.items.map(presentExport)), page);
}

/**
 * Long-poll (`Prefer: wait=N`, as for jobs; ../long-poll.ts): answers as soon as the status differs
 * from the status at the start, at once when the export already succeeded or failed, else after N seconds.
 */
export function waitForExportChange(item: ExportItem, seconds: number, stillValid: () => Promise<void>): Promise<ExportItem> {
  return untilStatusChanges(item, seconds, TERMINAL_EXPORT_STATUSES, (consistent) => getExportItem(item.id, consistent), stillValid, { route: 'exports.get', orgId: item.org_id });
}
