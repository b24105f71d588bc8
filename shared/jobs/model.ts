/**
 * The job item: its attributes, statuses and index attributes (D17, D21, D23). Shared by the job
 * routes, the ledger (approval charges) and, later, the pipeline (slots, submission counters).
 *
 * Counters kept on the job item (all numbers, never absent):
 * - files_approved, files_pending (submissions pending_score or retry_pending), slots_reserved;
 * - escrow_remaining_cents (live jobs: price × (files_needed − files_approved) until cancelled);
 * - summary: {total, approved, rejected, stars_sum, scored, by_type: {image|audio|video: {total,
 *   approved, stars_sum, scored}}} for the submission summary (D50, D56).
 * The sparse available-jobs index (GSI3, `gsi.availableJob`) is present exactly while the job is
 * open or in_progress with free slots > 0 (D23).
 */
import { gsi } from '../db/keys';
import type { Env } from '../types';

export const JOB_STATUSES = ['open', 'filled', 'in_progress', 'completed', 'cancelled'] as const;
export type JobStatus = (typeof JOB_STATUSES)[number];
/** Statuses a job can be cancelled from (spec cancel rule 1) and approved in (D29). */
export const ACTIVE_STATUSES: readonly JobStatus[] = ['open', 'filled', 'in_progress'];

export const CATEGORIES = ['image', 'audio', 'video'] as const;
export type Category = (typeof CATEGORIES)[number];
export const categoryOf = (mime: string): Category => mime.split('/')[0] as Category;

export type JobItem = Record<string, unknown> & {
  id: string;
  org_id: string;
  environment: Env;
  status: JobStatus;
  files_needed: number;
  files_approved: number;
  files_pending: number;
  slots_reserved: number;
  price_per_file_cents: number;
  worker_payout_per_file_cents: number;
  escrow_remaining_cents: number;
  /** Lots the escrow was drawn from, in expiry order (immutable; see ledger/escrow.ts). */
  escrow_sources: EscrowSource[];
};

export interface EscrowSource {
  lot_id: string;
  lot_sk: string;
  expires_at: string | null;
  cents: number;
}

export const emptySummary = () => ({
  total: 0,
  approved: 0,
  rejected: 0,
  stars_sum: 0,
  scored: 0,
  by_type: Object.fromEntries(CATEGORIES.map((c) => [c, { total: 0, approved: 0, stars_sum: 0, scored: 0 }])),
});

/** D23: free slots = files_needed − files_approved − pending − reserved. */
export function freeSlots(j: Pick<JobItem, 'files_needed' | 'files_approved' | 'files_pending' | 'slots_reserved'>): number {
  return Number(j.files_needed) - Number(j.files_approved) - Number(j.files_pending ?? 0) - Number(j.slots_reserved ?? 0);
}

/** GSI attributes of a job in a status (the status index, D21). */
export const jobIndex = (j: Pick<JobItem, 'org_id' | 'environment' | 'id'>, status: JobStatus) =>
  gsi.job(j.org_id, j.environment, j.id, status);

/** The available-jobs index attributes, or null when workers must not see the job (D23). */
export function availability(j: JobItem, status: JobStatus, free: number) {
  if (!(status === 'open' || status === 'in_progress') || free <= 0) return null;
  return gsi.availableJob(j.environment, j.worker_payout_per_file_cents, j.id);
}
