/**
 * Events written in one transaction happened at one time: they share their created_at, so an event
 * is never dated before one it follows from (a job.completed before the approval that completed
 * the job), which a receiver ordering by created_at would otherwise read backwards.
 */
import { Tx } from '../../shared/db/tx';
import { emit } from '../../shared/outbox';
import { clock } from '../../shared/clock';
import { decodeTime } from 'ulid';

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

test("an event id's time is its created_at, so listing with created_after neither repeats nor misses one (D38)", () => {
  const tx = new Tx();
  const approved = emit(tx, { type: 'submission.approved', orgId: 'org_1', env: 'live', jobId: 'job_1', data: { job_id: 'job_1' } });
  clock.advance(3);
  const completed = emit(tx, { type: 'job.completed', orgId: 'org_1', env: 'live', jobId: 'job_1', data: { job_id: 'job_1' } });
  for (const e of [approved, completed]) expect(decodeTime(e.id.slice('evt_'.length))).toBe(Date.parse(e.created_at));
});

test('the ids of one transaction sort as its events were emitted', () => {
  const tx = new Tx();
  const ids = Array.from({ length: 20 }, () => emit(tx, { type: 'submission.approved', orgId: 'org_1', env: 'live', jobId: 'job_1', data: {} }).id);
  expect([...ids].sort()).toEqual(ids);
});
