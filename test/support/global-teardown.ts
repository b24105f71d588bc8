/** Jest globalTeardown: stops the DynamoDB Local started by global-setup. */
export default async function globalTeardown(): Promise<void> {
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
