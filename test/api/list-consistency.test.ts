/**
 * A list read from the table itself is strongly consistent, so it shows the caller's own latest
 * writes (a key just created); DynamoDB's default, an eventually consistent read, may not yet
 * (DynamoDB Local always does, so the read's input is what can be checked here). A list read from
 * a global secondary index cannot be consistent: DynamoDB refuses ConsistentRead there.
 */
import { startTestRuntime, type TestRuntime } from '../support/harness';
import { recordDynamoCalls, type DynamoCallRecorder } from '../support/dynamo-calls';
import { newBuyer, type Buyer } from './billing-support';

let rt: TestRuntime;
let b: Buyer;
let rec: DynamoCallRecorder;
beforeAll(async () => {
  process.env.LOCAL_FIXED_OTP = '123456';
  rt = await startTestRuntime({ enablePollers: false, enableStreams: false });
  b = await newBuyer(rt, { verified: false });
  rec = recordDynamoCalls();
});
afterAll(async () => {
  rec.stop();
  await rt.stop();
});

const queries = () => rec.calls.filter((c) => c.command === 'QueryCommand').map((c) => c.input);

test('a list of the table itself (API keys) is read strongly consistent', async () => {
  rec.reset();
  const r = await rt.request('GET', '/v1/api_keys', { key: b.test });
  expect(r.status).toBe(200);
  expect(queries().length).toBeGreaterThan(0);
  for (const q of queries()) expect(q).toMatchObject({ ConsistentRead: true });
});

test('a list of an index (jobs) asks no consistency DynamoDB cannot give', async () => {
  rec.reset();
  const r = await rt.request('GET', '/v1/jobs', { key: b.test });
  expect(r.status).toBe(200);
  const q = queries();
  expect(q.length).toBeGreaterThan(0);
  for (const input of q) {
    expect(input.IndexName).toBeDefined();
    expect(input.ConsistentRead).toBeUndefined();
  }
});
