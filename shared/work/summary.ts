/**
 * The submission-summary counters on the job item (D50, D56), as `shared/jobs/view.ts`
 * `summaryClauses` lays them out (summary.{total, approved, rejected, stars_sum, scored,
 * by_type.<category>.{total, approved, stars_sum, scored}}), but with every path segment behind an
 * attribute-name placeholder: `total` is a DynamoDB reserved word, so the unescaped
 * `#smS.total` of the original is refused (ValidationException). Same placeholders prefix (`#sm`,
 * `:sm`), so it drops into `addApprovalCharges`' `jobUpdate` and `addSlotChange`'s `extra`.
 * Only final verdicts add stars (D56: retry_pending and pending_score count in the total only).
 */
import type { Category } from '../jobs/model';

export function summaryUpdate(category: Category, event: 'submitted' | 'approved' | 'rejected', stars?: number) {
  const names: Record<string, string> = {
    '#smS': 'summary',
    '#smB': 'by_type',
    '#smC': category,
    '#smT': 'total',
    '#smA': 'approved',
    '#smR': 'rejected',
    '#smSum': 'stars_sum',
    '#smN': 'scored',
  };
  const values: Record<string, unknown> = { ':smOne': 1 };
  const add: string[] = [];
  if (event === 'submitted') add.push('#smS.#smT :smOne', '#smS.#smB.#smC.#smT :smOne');
  if (event === 'approved') add.push('#smS.#smA :smOne', '#smS.#smB.#smC.#smA :smOne');
  if (event === 'rejected') add.push('#smS.#smR :smOne');
  if (event !== 'submitted' && stars !== undefined) {
    values[':smStars'] = stars;
    add.push('#smS.#smSum :smStars', '#smS.#smN :smOne', '#smS.#smB.#smC.#smSum :smStars', '#smS.#smB.#smC.#smN :smOne');
  }
  // DynamoDB refuses unused placeholders: keep only the names the clauses use.
  const used = Object.fromEntries(Object.entries(names).filter(([k]) => add.some((a) => a.split(/[ .]/).includes(k))));
  return { add, names: used, values };
}
