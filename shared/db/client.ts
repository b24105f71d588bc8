/**
 * AWS clients, created once per process (module scope, lazily) and pointed at the local emulators
 * when their endpoints are configured.
 */
import { DynamoDBClient, PutItemCommand } from '@aws-sdk/client-dynamodb';
import { DynamoDBDocumentClient } from '@aws-sdk/lib-dynamodb';
import { marshall } from '@aws-sdk/util-dynamodb';
import { config } from '../config';
import { keys } from './keys';
import { traced } from '../observability/tracer';

let doc: DynamoDBDocumentClient | null = null;
let raw: DynamoDBClient | null = null;

const localCredentials = { accessKeyId: 'local', secretAccessKey: 'local' };

export function dynamo(): DynamoDBClient {
  if (!raw) {
    const c = config();
    raw = traced(
      new DynamoDBClient({
        region: c.region,
        ...(c.dynamoEndpoint ? { endpoint: c.dynamoEndpoint, credentials: localCredentials } : {}),
        maxAttempts: 3,
      }),
    );
    if (c.localDurableTransactions && c.dynamoEndpoint) persistTransactionsAtOnce(raw, c.dynamoEndpoint, c.region);
  }
  return raw;
}

/**
 * DynamoDB Local keeps a committed TransactWriteItems in memory until its next plain write (or a
 * few seconds): a SIGKILL in between loses it, though the caller was told it committed (measured:
 * lost in 2 of 4 kills right after a transaction, in none after a following PutItem). DynamoDB does
 * not lose committed writes, so the local runtime, on a persistent table, follows each transaction
 * with a PutItem of one marker item, through its own client (request counters never see it).
 */
function persistTransactionsAtOnce(client: DynamoDBClient, endpoint: string, region: string): void {
  const flusher = traced(new DynamoDBClient({ region, endpoint, credentials: localCredentials, maxAttempts: 3 }));
  client.middlewareStack.add(
    (next, context) => async (args) => {
      const out = await next(args);
      if ((context as { commandName?: string }).commandName === 'TransactWriteItemsCommand') {
        await flusher.send(new PutItemCommand({ TableName: tableName(), Item: marshall(keys.localDurabilityMarker()) }));
      }
      return out;
    },
    { step: 'initialize', name: 'localDurableTransactions' },
  );
}

export function db(): DynamoDBDocumentClient {
  if (!doc) {
    // The document client shares the wrapped client's middleware stack, so its calls are traced by
    // the instrumentation traced() put there; traced() here finds it and adds nothing.
    doc = traced(
      DynamoDBDocumentClient.from(dynamo(), {
        marshallOptions: { removeUndefinedValues: true, convertClassInstanceToMap: false },
      }),
    );
  }
  return doc;
}

export function tableName(): string {
  return config().tableName;
}

/** For tests and the local runtime after changing endpoints. */
export function resetClients(): void {
  doc?.destroy();
  doc = null;
  raw = null;
}

export { localCredentials };
