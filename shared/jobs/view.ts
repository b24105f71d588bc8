/**
 * The job object (spec table + D17 echo) and its submission summary (D50, D56), plus the update
 * clauses the pipeline uses to keep the summary counters on the job item.
 */
import { CATEGORIES, categoryOf, type Category } from './model';

type Item = Record<string, unknown>;
const n = (v: unknown) => Number(v ?? 0);
const round = (v: number, digits: number) => Math.round(v * 10 ** digits) / 10 ** digits;

export function presentJob(j: Item) {
  return {
    id: j.id as string,
    object: 'job' as const,
    organization_id: j.org_id as string,
    environment: j.environment as string,
    type: j.type as string,
    title: (j.title as string | null) ?? null,
    description: j.description as string,
    status: j.status as string,
    files_needed: n(j.files_needed),
    files_approved: n(j.files_approved),
    files_remaining: n(j.files_needed) - n(j.files_approved),
    files_per_submission: n(j.files_per_submission),
    accepted_formats: j.accepted_formats as string[],
    price_per_file_cents: n(j.price_per_file_cents),
    platform_fee_pct: n(j.platform_fee_pct),
    total_cost_cents: n(j.total_cost_cents),
    worker_payout_per_file_cents: n(j.worker_payout_per_file_cents),
    scoring_criteria: (j.scoring_criteria as string | null) ?? null,
    min_star_rating: n(j.min_star_rating),
    min_duration_seconds: (j.min_duration_seconds as number | null) ?? null,
    max_duration_seconds: (j.max_duration_seconds as number | null) ?? null,
    min_width: (j.min_width as number | null) ?? null,
    min_height: (j.min_height as number | null) ?? null,
    worker_guidelines: (j.worker_guidelines as string | null) ?? null,
    location: (j.location as object | null) ?? null,
    metadata: (j.metadata as object | undefined) ?? {},
    // Spec: present after rating.
    ...(j.buyer_rating !== undefined && j.buyer_rating !== null
      ? { buyer_rating: n(j.buyer_rating), buyer_feedback: (j.buyer_feedback as string | null) ?? null }
      : {}),
    created_at: j.created_at as string,
    completed_at: (j.completed_at as string | null) ?? null,
    cancelled_at: (j.cancelled_at as string | null) ?? null,
  };
}

/** D50/D56: the submission summary of one job, from the counters on the job item. */
export function presentSummary(j: Item) {
  const s = (j.summary ?? {}) as Item;
  const byType = (s.by_type ?? {}) as Record<string, Item>;
  const approved = n(s.approved);
  const rejected = n(s.rejected);
  const scored = n(s.scored);
  const categories = [...new Set((j.accepted_formats as string[]).map(categoryOf))];
  return {
    object: 'submission_summary' as const,
    total_submissions: n(s.total),
    approved,
    rejected,
    approval_rate: approved + rejected > 0 ? round(approved / (approved + rejected), 4) : null,
    avg_ai_star_rating: scored > 0 ? round(n(s.stars_sum) / scored, 2) : null,
    by_type: CATEGORIES.filter((c) => categories.includes(c) || n(byType[c]?.total) > 0).map((c) => {
      const t = byType[c] ?? {};
      return {
        type: c,
        total: n(t.total),
        approved: n(t.approved),
        avg_ai_star_rating: n(t.scored) > 0 ? round(n(t.stars_sum) / n(t.scored), 2) : null,
      };
    }),
  };
}

/**
 * Update clauses (for the pipeline) that keep the summary counters: `submitted` when a submission
 * enters pending_score, and a verdict with its stars. Merge them into the job update (for an
 * approval: `addApprovalCharges`' `jobUpdate`). Placeholders are prefixed `:sm` / `#sm`.
 */
export function summaryClauses(category: Category, event: 'submitted' | 'approved' | 'rejected' | 'retry_pending', stars?: number) {
  // Every path segment is a name placeholder: `total` is a DynamoDB reserved word.
  const names: Record<string, string> = { '#smS': 'summary', '#smB': 'by_type', '#smC': category };
  const values: Record<string, unknown> = { ':smOne': 1 };
  const add: string[] = [];
  const bump = (field: string, value = ':smOne') => {
    names[`#smF${field}`] = field;
    add.push(`#smS.#smF${field} ${value}`, `#smS.#smB.#smC.#smF${field} ${value}`);
  };
  if (event === 'submitted') bump('total');
  if (event === 'approved') bump('approved');
  if (event === 'rejected') {
    names['#smFrejected'] = 'rejected';
    add.push('#smS.#smFrejected :smOne');
  }
  // D56: retry_pending counts in total_submissions only (not in the rate nor the average).
  if (stars !== undefined && (event === 'approved' || event === 'rejected')) {
    values[':smStars'] = stars;
    bump('stars_sum', ':smStars');
    bump('scored');
  }
  // Only the placeholders used (DynamoDB refuses unused names and values).
  const used = (k: string) => add.some((a) => a.split(/[\s.]/).includes(k));
  return {
    add,
    names: Object.fromEntries(Object.entries(names).filter(([k]) => used(k))),
    values: Object.fromEntries(Object.entries(values).filter(([k]) => used(k))),
  };
}
