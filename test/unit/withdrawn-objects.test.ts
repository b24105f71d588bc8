/**
 * D71: which messages of the `withdrawals` queue name a submission whose withdrawn objects are to
 * be deleted. (The deletion itself, end to end: test/api/override.test.ts.)
 */
import { withdrawnSubmissionOf } from '../../shared/work/withdrawn-objects';
import { PoisonMessage } from '../../shared/work/stage-message';
import { newId } from '../../shared/ids';

const record = (decision: string, eventName = 'INSERT', type = 'submission.overridden') =>
  JSON.stringify({
    eventName,
    dynamodb: { NewImage: { entity: { S: 'event' }, type: { S: type }, envelope: { M: { data: { M: { submission_id: { S: 'sub_1' }, decision: { S: decision } } } } } } },
  });

describe('the withdrawals queue', () => {
  test('the INSERT record of an override that rejected names its submission', () => {
    expect(withdrawnSubmissionOf(record('reject'))).toBe('sub_1');
  });

  test('an override that approved withdrew nothing: no submission, nothing deleted', () => {
    expect(withdrawnSubmissionOf(record('approve'))).toBeNull();
  });

  test("an operator's redrive message names its submission", () => {
    const id = newId('submission');
    expect(withdrawnSubmissionOf(JSON.stringify({ kind: 'withdrawal.delete', submission_id: id }))).toBe(id);
  });

  test('anything else is poison (retried, then the DLQ), never read as a deletion', () => {
    for (const body of ['not json', record('reject', 'MODIFY'), record('reject', 'INSERT', 'submission.approved'), '{"kind":"withdrawal.delete"}', '{"kind":"withdrawal.delete","submission_id":"job_1"}', '{"kind":"withdrawal.delete","submission_id":"sub_2"}']) {
      expect(() => withdrawnSubmissionOf(body)).toThrow(PoisonMessage);
    }
  });
});
