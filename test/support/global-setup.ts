/**
 * Jest globalSetup: one in-memory DynamoDB Local for the whole run. Its endpoint goes to
 * process.env.DYNAMODB_ENDPOINT, which the test workers inherit (they are forked after this runs),
 * for the tests that start a runtime or fixtures of their own on it; the runtimes of
 * `startTestRuntime` use their file's own DynamoDB Local (test/support/harness.ts).
 */
import { startDynamoDbLocal, type DynamoDbLocal } from '../../local/dynamodb';

declare global {
  // Shared with global-teardown (same process).
  var __dynamoDbLocal: DynamoDbLocal | undefined;
}

export default async function globalSetup(): Promise<void> {
  if (process.env.DYNAMODB_ENDPOINT) return; // a DynamoDB Local provided by the caller
  const dynamo = await startDynamoDbLocal();
  globalThis.__dynamoDbLocal = dynamo;
  process.env.DYNAMODB_ENDPOINT = dynamo.endpoint;
  process.env.DYNAMODB_LOCAL_PID = String(dynamo.pid);
}
