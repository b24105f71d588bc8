/**
 * The sandbox's scenarios (D40; docs/sandbox.md): which one a test job asked for in its metadata,
 * and the verdict `mixed` gives each upload.
 */
import type { SandboxDirective } from '../scoring/types';

export const SCENARIOS = ['approve_all', 'mixed', 'slow'] as const;
export type Scenario = (typeof SCENARIOS)[number];

export function scenarioOf(job: Record<string, unknown>): Scenario {
  const s = (job.metadata as Record<string, unknown> | null | undefined)?.sandbox_scenario;
  return typeof s === 'string' && (SCENARIOS as readonly string[]).includes(s) ? (s as Scenario) : 'approve_all';
}

/**
 * `mixed`, by upload index, in every run of ten uploads: the 2nd scores 2 stars (→ retry_pending,
 * then retried once with a 4-star file), the 3rd scores 1 star (rejected), the 4th repeats the
 * first upload's bytes (rejected as a duplicate by the real D26 check); the others score 4.
 */
export function mixedPlan(index: number): { directive: SandboxDirective; duplicateOfFirst: boolean } {
  switch (index % 10) {
    case 1:
      return { directive: 'retry', duplicateOfFirst: false };
    case 2:
      return { directive: 'reject', duplicateOfFirst: false };
    case 3:
      return { directive: 'approve', duplicateOfFirst: true };
    default:
      return { directive: 'approve', duplicateOfFirst: false };
  }
}
