/**
 * Reads of the work side: the workers' job board (D23, D45), a worker's history, the buyer's
 * submission lists (D12, D24: never a worker-only status) and the submission summary (D50, D56).
 */
import { paginateQuery } from '@aws-sdk/lib-dynamodb';
import { db, tableName } from '../db/client';
import { indexKeys } from '../db/keys';
import { queryPage, listBody } from '../db/query';
import { binding, decodeCursor, encodeCursor } from '../cursor';
import { ulidFloor } from '../ids';
import { addMs, now, DAY_MS } from '../clock';
import { errors } from '../errors';
import { CATEGORIES, freeSlots, type JobItem } from '../jobs/model';
import { presentSummary } from '../jobs/view';
import { getJobItem } from '../jobs';
import { presentSubmission, presentWorkerSubmission, type SubmissionItem } from './model';
import { approvedFileUrl } from '../files';
import type { BuyerPrincipal, WorkerPrincipal } from '../types';

type Item = Record<string, unknown>;

/** D45: the worker view of a job (exactly D45's fields: the buyer's scoring criteria and minimum rating stay the buyer's). */
export function presentWorkerJob(j: JobItem) {
  return {
    object: 'worker_job' as const,
    id: j.id,
    type: j.type as string,
    title: (j.title as string | null) ?? null,
    description: j.description as string,
    accepted_formats: j.accepted_formats as string[],
    files_per_submission: Number(j.files_per_submission ?? 1),
    worker_payout_per_file_cents: Number(j.worker_payout_per_file_cents),
    min_duration_seconds: (j.min_duration_seconds as number | null) ?? null,
    max_duration_seconds: (j.max_duration_seconds as number | null) ?? null,
    min_width: (j.min_width as number | null) ?? null,
    min_height: (j.min_height as number | null) ?? null,
    worker_guidelines: (j.worker_guidelines as string | null) ?? null,
    location: (j.location as object | null) ?? null,
    slots_available: Math.max(0, freeSlots(j)),
    created_at: j.created_at as string,
  };
}

/** GET /internal/worker/jobs/available: jobs with free slots in the worker's environment, best paid first (GSI3 desc). */
export async function listAvailableJobs(w: WorkerPrincipal, q: { limit: number; cursor?: string }) {
  const ix = indexKeys.availableJobs(w.env);
  const page = await queryPage<JobItem>({
    index: ix.index,
    pk: ix.pk,
    limit: q.limit,
    cursor: q.cursor,
    binding: binding({ what: 'available_jobs', env: w.env }),
  });
  return listBody(page.items.map(presentWorkerJob), page);
}

/** GET /internal/worker/submissions: the worker's history, newest first, every status. */
export async function listWorkerSubmissions(w: WorkerPrincipal, q: { status?: string; job_id?: string; limit: number; cursor?: string }) {
  const ix = indexKeys.workerSubmissions(w.workerId);
  const filters = filterOf({ status: q.status, job_id: q.job_id });
  const page = await queryPage<SubmissionItem>({
    index: ix.index,
    pk: ix.pk,
    limit: q.limit,
    cursor: q.cursor,
    ...(filters ? { filter: filters } : {}),
    binding: binding({ what: 'worker_submissions', w: w.workerId, status: q.status, job_id: q.job_id }),
  });
  return listBody(page.items.map(presentWorkerSubmission), page);
}

function filterOf(f: { status?: string; job_id?: string; min_score?: number; tenant?: { org: string; env: string } }) {
  const parts: string[] = [];
  const names: Record<string, string> = {};
  const values: Record<string, unknown> = {};
  if (f.status) {
    parts.push('#fs = :fs');
    names['#fs'] = 'status';
    values[':fs'] = f.status;
  }
  if (f.job_id) {
    parts.push('job_id = :fj');
    values[':fj'] = f.job_id;
  }
  if (f.min_score !== undefined) {
    parts.push('ai_star_rating >= :fm');
    values[':fm'] = f.min_score;
  }
  if (f.tenant) {
    parts.push('org_id = :fo AND environment = :fe');
    values[':fo'] = f.tenant.org;
    values[':fe'] = f.tenant.env;
  }
  return parts.length ? { expression: parts.join(' AND '), ...(Object.keys(names).length ? { names } : {}), values } : null;
}

async function presentForBuyer(items: SubmissionItem[]) {
  return Promise.all(items.map(async (s) => presentSubmission(s, await approvedFileUrl(s))));
}

/** GET /v1/jobs/{id}/submissions (pattern 21): every buyer-visible status, `status` filter. */
export async function listJobSubmissions(job: JobItem, q: { status?: string; limit: number; cursor?: string }) {
  const ix = indexKeys.jobSubmissions(job.id);
  const filters = filterOf({ status: q.status });
  const page = await queryPage<SubmissionItem>({
    index: ix.index,
    pk: ix.pk,
    limit: q.limit,
    cursor: q.cursor,
    ...(filters ? { filter: filters } : {}),
    binding: binding({ what: 'job_submissions', job: job.id, status: q.status }),
  });
  return listBody(await presentForBuyer(page.items), page);
}

export interface DateRange {
  start_date?: string;
  end_date?: string;
}

/** Spec: `start_date` defaults to 30 days ago, `end_date` to now; a reversed range is 422 (D4). */
export function resolveRange(q: DateRange): { start: Date; end: Date } {
  const end = q.end_date ? new Date(q.end_date) : now();
  const start = q.start_date ? new Date(q.start_date) : addMs(end, -30 * DAY_MS);
  if (start.getTime() > end.getTime()) {
    throw errors.unprocessable('start_date must not be after end_date.', [{ field: 'start_date', message: 'after end_date', code: 'invalid_range' }]);
  }
  return { start, end };
}

const rangeKeys = (r: { start: Date; end: Date }) => ({ skAfter: ulidFloor('submission', r.start, '0'), skBefore: ulidFloor('submission', r.end, 'Z') });

/**
 * The cursor of a list whose range defaults from the clock (D12): bound to the query parameters as
 * the client sent them, and carrying the range the first page resolved, so every next page reads
 * exactly that range however much later it is asked for (a range recomputed from now() would
 * differ, and a cursor bound to it would be refused). Inside, the page position is signed again
 * with the range in its binding for `queryPage`.
 */
const rangePageBinding = (sent: string, r: { start: Date; end: Date }) =>
  binding({ sent, start: r.start.toISOString(), end: r.end.toISOString() });

async function openRangeCursor(cursor: string | undefined, sent: string, q: DateRange) {
  if (!cursor) {
    const range = resolveRange(q);
    return { range, pageCursor: undefined };
  }
  const carried = await decodeCursor(cursor, sent);
  const range = { start: new Date(String(carried.start)), end: new Date(String(carried.end)) };
  if (!carried.k || typeof carried.k !== 'object' || Number.isNaN(range.start.getTime()) || Number.isNaN(range.end.getTime())) {
    // Signed by this service with this binding, so only a bug can get here.
    throw new Error('a range cursor without its position or range');
  }
  return { range, pageCursor: await encodeCursor(carried.k as Record<string, unknown>, rangePageBinding(sent, range)) };
}

async function closeRangeCursor(pageCursor: string | null, sent: string, range: { start: Date; end: Date }) {
  if (!pageCursor) return null;
  const k = await decodeCursor(pageCursor, rangePageBinding(sent, range));
  return encodeCursor({ k, start: range.start.toISOString(), end: range.end.toISOString() }, sent);
}

/** GET /v1/submissions (pattern 22): the tenant's submissions in a date range (ULID key range), filters. */
export async function listTenantSubmissions(
  p: BuyerPrincipal,
  q: DateRange & { job_id?: string; status?: string; min_score?: number; limit: number; cursor?: string },
) {
  const sent = binding({
    what: 'submissions',
    org: p.orgId,
    env: p.env,
    job_id: q.job_id,
    status: q.status,
    min_score: q.min_score,
    start_date: q.start_date,
    end_date: q.end_date,
  });
  const { range, pageCursor } = await openRangeCursor(q.cursor, sent, q);
  const ix = q.job_id ? indexKeys.jobSubmissions(q.job_id) : indexKeys.tenantSubmissions(p.orgId, p.env);
  const filters = filterOf({
    status: q.status,
    min_score: q.min_score,
    // The job index is not tenant-scoped: another tenant's job_id must list nothing (D3).
    ...(q.job_id ? { tenant: { org: p.orgId, env: p.env } } : {}),
  });
  const page = await queryPage<SubmissionItem>({
    index: ix.index,
    pk: ix.pk,
    limit: q.limit,
    cursor: pageCursor,
    ...rangeKeys(range),
    ...(filters ? { filter: filters } : {}),
    binding: rangePageBinding(sent, range),
  });
  const nextCursor = await closeRangeCursor(page.nextCursor, sent, range);
  return listBody(await presentForBuyer(page.items), { hasMore: page.hasMore, nextCursor });
}

const round = (v: number, digits: number) => Math.round(v * 10 ** digits) / 10 ** digits;

/**
 * GET /v1/submissions/summary (D50, D56). With `job_id` and no dates: the counters kept on the job
 * item (pattern 24, all time). Otherwise the submissions created in the range (30-day default)
 * are aggregated from the tenant index (pattern 25).
 */
export async function submissionSummary(p: BuyerPrincipal, q: DateRange & { job_id?: string }) {
  if (q.job_id && !q.start_date && !q.end_date) {
    const job = await getJobItem(q.job_id, false);
    if (!job || job.org_id !== p.orgId || job.environment !== p.env) return emptySummary();
    return presentSummary(job);
  }
  const range = resolveRange(q);
  const ix = q.job_id ? indexKeys.jobSubmissions(q.job_id) : indexKeys.tenantSubmissions(p.orgId, p.env);
  const { skAfter, skBefore } = rangeKeys(range);
  const agg = { total: 0, approved: 0, rejected: 0, stars: 0, scored: 0 };
  const byType = new Map<string, { total: number; approved: number; stars: number; scored: number }>();
  const pages = paginateQuery(
    { client: db() },
    {
      TableName: tableName(),
      IndexName: ix.index,
      KeyConditionExpression: `${ix.index}PK = :pk AND ${ix.index}SK BETWEEN :a AND :b`,
      FilterExpression: 'org_id = :o AND environment = :e',
      ExpressionAttributeValues: { ':pk': ix.pk, ':a': skAfter, ':b': skBefore, ':o': p.orgId, ':e': p.env },
      ProjectionExpression: '#s, ai_star_rating, category',
      ExpressionAttributeNames: { '#s': 'status' },
    },
  );
  for await (const page of pages) {
    for (const s of page.Items ?? []) {
      const cat = (s.category as string) ?? 'image';
      const t = byType.get(cat) ?? { total: 0, approved: 0, stars: 0, scored: 0 };
      byType.set(cat, t);
      agg.total++;
      t.total++;
      // D56: only final verdicts count in the rate and the average.
      if (s.status === 'approved' || s.status === 'rejected') {
        agg[s.status as 'approved' | 'rejected']++;
        if (s.status === 'approved') t.approved++;
        // A rejection no model scored (a cancelled job's) has no rating: it counts in the rate only.
        if (typeof s.ai_star_rating === 'number') {
          agg.stars += s.ai_star_rating;
          agg.scored++;
          t.stars += s.ai_star_rating;
          t.scored++;
        }
      }
    }
  }
  return {
    object: 'submission_summary' as const,
    total_submissions: agg.total,
    approved: agg.approved,
    rejected: agg.rejected,
    approval_rate: agg.approved + agg.rejected > 0 ? round(agg.approved / (agg.approved + agg.rejected), 4) : null,
    avg_ai_star_rating: agg.scored > 0 ? round(agg.stars / agg.scored, 2) : null,
    by_type: CATEGORIES.filter((c) => byType.has(c)).map((c) => {
      const t = byType.get(c)!;
      return { type: c, total: t.total, approved: t.approved, avg_ai_star_rating: t.scored > 0 ? round(t.stars / t.scored, 2) : null };
    }),
  };
}

function emptySummary() {
  return { object: 'submission_summary' as const, total_submissions: 0, approved: 0, rejected: 0, approval_rate: null, avg_ai_star_rating: null, by_type: [] };
}
