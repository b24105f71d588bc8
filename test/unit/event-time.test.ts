/**
 * Events written in one transaction happened at one time: they share their created_at, so an event
 * is never dated before one it follows from (a job.completed before the approval that completed
 * the job), which a receiver ordering by created_at would otherwise read backwards.
 */
import { Tx } from '../../shared/db/tx';
import { emit } from '../../shared/outbox';
import { clock } from '../../shared/clock';

beforeEach(() => clock.set(new Date('2026-11-27T09:00:00.000Z')));
afterEach(() => clock.reset());

test('the events of one transaction share one created_at, however long the transaction took to build', () => {
  const tx = new Tx();
  const approved = emit(tx, { type: 'submission.approved', orgId: 'org_1', env: 'live', jobId: 'job_1', data: { job_id: 'job_1' } });
  clock.advance(5);
  const completed = emit(tx, { type: 'job.completed', orgId: 'org_1', env: 'live', jobId: 'job_1', data: { job_id: 'job_1' } });
  expect(completed.created_at).toBe(approved.created_at);
});

test('events of separate transactions keep their own times', () => {
  const first = emit(new Tx(), { type: 'job.created', orgId: 'org_1', env: 'live', jobId: 'job_1', data: {} });
  clock.advance(5);
  const second = emit(new Tx(), { type: 'job.cancelled', orgId: 'org_1', env: 'live', jobId: 'job_1', data: {} });
  expect(Date.parse(second.created_at) - Date.parse(first.created_at)).toBe(5);
});
