/**
 * AWS clients, created once per process (module scope, lazily) and pointed at the local emulators
 * when their endpoints are configured.
 */
import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { DynamoDBDocumentClient } from '@aws-sdk/lib-dynamodb';
import { config } from '../config';
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
  }
  return raw;
}

export function db(): DynamoDBDocumentClient {
  if (!doc) {
    // traced() again: the document client sends through its own `send` (on the wrapped client's
    // middleware stack), which must wait for that stack's X-Ray instrumentation too.
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
