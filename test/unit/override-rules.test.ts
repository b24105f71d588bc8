/**
 * D71 override rules on a submission whose retry was planned (D27): files no verdict covered are
 * never approved by override. The end-to-end cases are in test/api/override.test.ts.
 */
import { overrideConflict } from '../../shared/work/override';
import type { SubmissionItem } from '../../shared/work/model';
import type { JobItem } from '../../shared/jobs/model';

const at = new Date('2026-11-20T12:00:00Z');
const job = { id: 'job_1', status: 'open', files_needed: 3, files_approved: 0, files_pending: 1, slots_reserved: 0 } as unknown as JobItem;
/** A file the pipeline scored and annotated (an approval needs both). */
const scored = { score: { star_rating: 1 }, annotations: { type: 'image' } };

/** A submission decided on round r1 (1 star) whose worker then planned a retry as round r2. */
function sub(over: Partial<SubmissionItem>): SubmissionItem {
  return {
    id: 'sub_1',
    status: 'retry_pending',
    attempt: 1,
    round: 'r1',
    uploads: [{ file_id: 'file_a' }],
    parts: { file_a: scored },
    scored_at: '2026-11-20T11:00:00Z',
    ...over,
  } as unknown as SubmissionItem;
}
const codeOf = (e: unknown) => (e as { details?: { code: string }[] } | null)?.details?.[0]?.code ?? null;

describe('D54/D71: an approval delivers Files with their annotations', () => {
  it('a file whose annotations are not recorded yet is refused, to retry once they are', () => {
    const e = overrideConflict(sub({ parts: { file_a: { score: { star_rating: 1 } } } as never }), job, 'approve', at);
    expect([codeOf(e), (e as Error | null)?.message]).toEqual(['invalid_state', expect.stringMatching(/still being annotated/)]);
  });
});

describe('D71/D27: an override never approves a retry that did not complete', () => {
  it('a retry_pending submission with no retry planned may be approved', () => {
    expect(overrideConflict(sub({}), job, 'approve', at)).toBeNull();
  });

  it('a retry_pending submission whose planned retry has landed and been scored is refused: no verdict covers those files', () => {
    const s = sub({ round: 'r2', retry_round: 'r2', uploads: [{ file_id: 'file_b' }] as never, parts: { file_b: scored } as never });
    expect(codeOf(overrideConflict(s, job, 'approve', at))).toBe('invalid_state');
  });

  it('a submission rejected when its planned retry ran out is refused, even with the retry\u2019s files scored', () => {
    const s = sub({ status: 'rejected', round: 'r2', retry_round: 'r2', uploads: [{ file_id: 'file_b' }] as never, parts: { file_b: scored } as never });
    const e = overrideConflict(s, job, 'approve', at);
    expect(codeOf(e)).toBe('invalid_state');
    expect((e as Error).message).toMatch(/retry never completed/);
  });

  it('a completed retry (attempt 2) is judged on its own verdict and may be approved', () => {
    const s = sub({ status: 'rejected', attempt: 2, round: 'r2', retry_round: 'r2', uploads: [{ file_id: 'file_b' }] as never, parts: { file_b: scored } as never });
    expect(overrideConflict(s, { ...job, files_pending: 0 } as JobItem, 'approve', at)).toBeNull();
  });
});
