/**
 * What each function may call, as the stack grants it, enforced per invocation in the local runtime.
 *
 * Deployed, a function's role allows exactly the access of its manifest entry (lib/constructs/
 * grants.ts). Locally one set of emulator credentials serves every handler, so neither the S3
 * emulator, DynamoDB Local nor the SQS emulator can refuse a call the deployed role could not
 * make. Instead each invocation runs inside `withGrants` (local/lambda.ts `grantedTo`), and every
 * AWS SDK call of the process passes this check first (shared/observability/invocation.ts, through
 * `traced()`): AccessDenied here first, as deployed. Outside an invocation (tests, scripts, the
 * runtime itself) nothing is checked.
 *
 * - Bucket (`access.bucket`): action by action and prefix by prefix (bucket-grants.ts);
 *   test/cdk/stack.test.ts checks these rules against every function's synthesized policy.
 * - Table (`access.table`): `write` may do anything on the table; `read` only reads, plus the
 *   request count's UpdateItem on the partitions `REQUEST_COUNT_PARTITIONS` naming only the
 *   attributes `REQUEST_COUNT_ATTRIBUTES` (routes with a rate limit), as the stack's
 *   `dynamodb:LeadingKeys` and `dynamodb:Attributes` conditions allow.
 * - Queues: SendMessage only to the queues of `access.sendTo`; a consumer may also change the
 *   visibility of its own queue's messages.
 * - The sealing key (`access.kms`): per purpose, GenerateDataKey with `encrypt`, Decrypt with
 *   `decrypt`, each only with that purpose's encryption context, as the stack's IAM condition (the local keyring, which stands in for the key, is checked the same way:
 *   shared/secrets/sealer.ts); Bedrock (`access.bedrock`) the configured models; Transcribe
 *   (`access.transcribe`) StartTranscriptionJob on our job names; SNS (`access.sms`) Publish (the
 *   local SMS outbox too); STS (`access.uploadSigner`) AssumeRole on the upload-signing role. Any other service: refused, as no function of the stack is granted one.
 */
import { AsyncLocalStorage } from 'node:async_hooks';
import { AwsServiceError } from '../shared/aws/signed-call';
import { setLocalAnswerCheck, setLocalCallCheck } from '../shared/observability/invocation';
import { AccessDenied, type Grants } from './grants-model';
import { allows, checkBucket } from './bucket-grants';
import { checkTable } from './table-grants';
import { checkQueue, checkService } from './service-grants';

export { AccessDenied, type Grants };
export { allows, type BucketAction } from './bucket-grants';
export { attributesNamed } from './table-grants';

const store = new AsyncLocalStorage<Grants>();

/** Runs one invocation of a function with its grants. */
export function withGrants<T>(grants: Grants, run: () => T): T {
  return store.run(grants, run);
}

/** Refuses an AWS call the current invocation's grants do not allow. */
export function checkGrantedCall(client: string, command: string, input: unknown): void {
  const g = store.getStore();
  if (!g) return;
  const i = (input ?? {}) as never;
  if (client === 'S3Client') checkBucket(g, command, i);
  else if (client === 'DynamoDBClient') checkTable(g, command, i);
  else if (client === 'SQSClient') {
    checkQueue(g, command, i);
    carryTraceHeader(g, command, i);
  } else checkService(g, client, command, i);
}

type SystemAttributes = { MessageSystemAttributes?: Record<string, { DataType: string; StringValue?: string }> };

/**
 * Deployed, the SDK sends the invocation's trace header with every request (X-Amzn-Trace-Id) and
 * SQS keeps it with the message (`AWSTraceHeader`), which is how Lambda counts a chain's
 * invocations (local/lineage.ts). Locally the same header goes in the send's
 * `MessageSystemAttributes.AWSTraceHeader`, SQS's other way of taking it (one set by the caller
 * is kept, as SQS prefers it to the header).
 */
function carryTraceHeader(g: Grants, command: string, input: SystemAttributes & { Entries?: SystemAttributes[] }): void {
  if (!g.traceHeader) return;
  const stamp = (m: SystemAttributes) => {
    if (m.MessageSystemAttributes?.AWSTraceHeader) return;
    m.MessageSystemAttributes = { ...m.MessageSystemAttributes, AWSTraceHeader: { DataType: 'String', StringValue: g.traceHeader } };
  };
  if (command === 'SendMessageCommand') stamp(input);
  else if (command === 'SendMessageBatchCommand') for (const e of input.Entries ?? []) stamp(e);
}

/** The codes S3 answers for a key that holds no object. */
const MISSING_OBJECT = new Set(['NoSuchKey', 'NotFound']);

/**
 * What the deployed role gets instead of an emulator's error: S3 answers a key that holds no object
 * with 404 only to a caller allowed s3:ListBucket; to any other it answers 403 AccessDenied, so as
 * not to tell which keys exist. s3rver answers 404 to everyone, so without this a function that
 * counts on the 404 would pass here and fail deployed.
 */
export function answerAsGranted(client: string, command: string, _input: unknown, err: unknown): unknown {
  const g = store.getStore();
  if (!g || client !== 'S3Client') return err;
  const e = err as { name?: string; $metadata?: { httpStatusCode?: number } } | null;
  if (e?.$metadata?.httpStatusCode !== 404 || !MISSING_OBJECT.has(e.name ?? '')) return err;
  if (allows(g.bucket, 's3:ListBucket', null)) return err;
  const denied = new AccessDenied(`Access Denied (${g.fn} may not list the bucket, so a missing object answers 403, as deployed)`);
  // A HEAD answer has no body, hence no code: 403 alone, which the object client names Forbidden
  // and the SDK's S3 client Unknown.
  if (command === 'HeadObjectCommand') denied.name = err instanceof AwsServiceError ? 'Forbidden' : 'Unknown';
  return denied;
}

setLocalCallCheck(checkGrantedCall);
setLocalAnswerCheck(answerAsGranted);
