/**
 * GET /v1/jobs/{id}/files reads a global secondary index, which DynamoDB updates asynchronously:
 * a buyer who has just seen the job completed could list it before the index holds its last file.
 * The first page of a list it reads whole waits (briefly) until the index holds every file the job
 * had approved when the request read the job, so the files of a completed job are all listed.
 *
 * The runtime lags its indexes by a second here, longer than DynamoDB usually does, so that every
 * list made just after the completion starts with an index that has not taken in the last file.
 */
import { startTestRuntime, waitFor, type TestRuntime } from '../support/harness';
import { signupBuyer, idemKey, type TestBuyer } from '../support/buyers';
import { getJobItem } from '../../shared/jobs';
import { emulateIndexLag } from '../../local/index-lag';
import { QueryCommand, UpdateCommand } from '@aws-sdk/lib-dynamodb';
import { db, tableName } from '../../shared/db/client';
import { indexKeys } from '../../shared/db/keys';

let rt: TestRuntime;
let buyer: TestBuyer;
beforeAll(async () => {
  rt = await startTestRuntime({ sandboxDelaySeconds: 0, indexLagMs: 1000 });
  buyer = await signupBuyer(rt, 'Files Consistency');
});
afterAll(async () => {
  await rt?.stop();
});

/** A sandbox job of `files` files, read strongly consistent from the moment it completes. */
async function completedTestJob(files: number): Promise<string> {
  const r = await rt.request('POST', '/v1/jobs', {
    key: buyer.test,
    headers: { 'Idempotency-Key': idemKey() },
    body: { type: 'data_collection', title: 'Listed at once', description: 'Photos of shapes for the files list consistency test', files_needed: files, accepted_formats: ['image/jpeg'], price_per_file_cents: 25 },
  });
  expect(r.status).toBe(201);
  await waitFor(async () => (await getJobItem(r.json.id, true))?.status === 'completed', { timeoutMs: 120_000, intervalMs: 20 });
  return r.json.id as string;
}

test('the files of a job just completed are all listed, although the index has not yet taken in the last one', async () => {
  const jobId = await completedTestJob(2);

  const r = await rt.request('GET', `/v1/jobs/${jobId}/files`, { key: buyer.test });

  expect(r.status).toBe(200);
  expect(r.json.data).toHaveLength(2);
  expect(r.json.has_more).toBe(false);
}, 180_000);

test('the list waits for the index only briefly: an index far behind answers with what it holds', async () => {
  const jobId = await completedTestJob(1);
  emulateIndexLag(60_000); // from here on, nothing written reaches the index within the test
  try {
    // An approval the index has not taken in: the file is written again (as DynamoDB would
    // propagate a change), so the index leaves it out for a minute.
    const files = await db().send(new QueryCommand({ TableName: tableName(), IndexName: indexKeys.jobFiles(jobId).index!, KeyConditionExpression: 'GSI1PK = :pk', ExpressionAttributeValues: { ':pk': indexKeys.jobFiles(jobId).pk } }));
    expect(files.Items).toHaveLength(1);
    const file = files.Items![0]!;
    await db().send(new UpdateCommand({ TableName: tableName(), Key: { PK: file.PK, SK: file.SK }, UpdateExpression: 'SET created_at = created_at' }));

    const r = await rt.request('GET', `/v1/jobs/${jobId}/files`, { key: buyer.test });

    expect(r.status).toBe(200);
    expect(r.json.data).toEqual([]);
  } finally {
    emulateIndexLag(1000);
  }
}, 180_000);
