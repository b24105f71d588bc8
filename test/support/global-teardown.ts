/**
 * Jest globalTeardown: stops the DynamoDB Local the last test files' runtimes used
 * (test/support/environment.cjs) and the one started by global-setup.
 */
export default async function globalTeardown(): Promise<void> {
  await (globalThis as { __dynamoForFiles?: { stop(): Promise<void> } }).__dynamoForFiles?.stop();
  const dynamo = globalThis.__dynamoDbLocal;
  if (dynamo) {
    await dynamo.stop();
    globalThis.__dynamoDbLocal = undefined;
    delete process.env.DYNAMODB_ENDPOINT;
    return;
  }
  const pid = Number(process.env.DYNAMODB_LOCAL_PID);
  if (pid) {
    try {
      process.kill(pid, 'SIGTERM');
    } catch {
      // already gone
    }
  }
}
