/**
 * A long poll reads with eventually consistent GetItems, which DynamoDB may serve from a replica
 * that has not seen the latest write (DynamoDB Local never does). A wait must never answer with a
 * status or counters older than the item it started from: a differing read is confirmed by a
 * strongly consistent one, and the answer after the whole wait is read consistently.
 */
import { randomBytes } from 'node:crypto';
import { untilStatusChanges } from '../../shared/long-poll';
import { startTestRuntime, type TestRuntime } from '../support/harness';

let rt: TestRuntime;
beforeAll(async () => {
  rt = await startTestRuntime({ enablePollers: false, enableStreams: false });
});
afterAll(() => rt?.stop());

type Item = { status: string; files_approved: number };
const holder = () => ({ route: 'jobs.get', orgId: `org_${randomBytes(6).toString('hex')}` });
const valid = async () => undefined;
/** A table whose replicas lag: eventually consistent reads get `stale`, consistent ones `latest`. */
const lagging = (stale: Item, latest: Item) => {
  const reads = { eventual: 0, consistent: 0 };
  const read = async (consistent: boolean) => {
    if (consistent) reads.consistent++;
    else reads.eventual++;
    return consistent ? latest : stale;
  };
  return { read, reads };
};

test('a status older than the one at the start, read from a lagging replica, does not answer the wait', async () => {
  const start: Item = { status: 'running', files_approved: 2 };
  const t = lagging({ status: 'pending', files_approved: 0 }, start);
  const answer = await untilStatusChanges(start, 1, ['completed'], t.read, valid, holder());
  expect(answer.status).toBe('running');
  expect(t.reads.eventual).toBeGreaterThan(1); // it went on waiting after the stale read
});

test('a changed status answers the wait once a consistent read confirms it', async () => {
  const t = lagging({ status: 'completed', files_approved: 10 }, { status: 'completed', files_approved: 10 });
  const answer = await untilStatusChanges({ status: 'running', files_approved: 9 }, 5, ['completed'], t.read, valid, holder());
  expect(answer).toEqual({ status: 'completed', files_approved: 10 });
  expect(t.reads).toEqual({ eventual: 1, consistent: 1 });
});

test('the answer after a whole wait without a change is read consistently: counters never go back', async () => {
  const start: Item = { status: 'running', files_approved: 3 };
  const t = lagging({ status: 'running', files_approved: 1 }, { status: 'running', files_approved: 4 });
  const answer = await untilStatusChanges(start, 1, ['completed'], t.read, valid, holder());
  expect(answer.files_approved).toBe(4);
});
