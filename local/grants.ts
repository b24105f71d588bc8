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
 * - Bucket (`access.bucket`): action by action and prefix by prefix below; test/cdk/stack.test.ts
 *   checks these rules against every function's synthesized policy.
 * - Table (`access.table`): `write` may do anything on the table; `read` only reads, plus the
 *   request count's UpdateItem on the partitions `REQUEST_COUNT_PARTITIONS` naming only the
 *   attributes `REQUEST_COUNT_ATTRIBUTES` (routes with a rate limit), as the stack's
 *   `dynamodb:LeadingKeys` and `dynamodb:Attributes` conditions allow.
 * - Queues: SendMessage only to the queues of `access.sendTo`; a consumer may also change the
 *   visibility of its own queue's messages.
 * - The sealing key (`access.kms`): GenerateDataKey with `encrypt`, Decrypt with `decrypt`, each
 *   only with the sealer's encryption context, as the stack's IAM condition (the local keyring, which stands in for the key, is checked the same way:
 *   shared/secrets/sealer.ts); Bedrock (`access.bedrock`) the configured models; Transcribe
 *   (`access.transcribe`) StartTranscriptionJob on our job names; SNS (`access.sms`) Publish (the
 *   local SMS outbox too); STS (`access.uploadSigner`) AssumeRole on the upload-signing role. Any other service: refused, as no function of the stack is granted one.
 */
import { contextStore } from '../shared/context-store';
import { BUCKET_PREFIXES, TRANSCRIBE_JOB_PREFIX } from '../shared/manifest/wiring';
import { DEFAULT_BEDROCK_MODEL_ID } from '../shared/scoring/bedrock-reply';
import { BUCKET_GRANTS, REQUEST_COUNT_ATTRIBUTES, REQUEST_COUNT_PARTITIONS, WAIT_SLOT_ATTRIBUTES, WAIT_SLOT_PARTITIONS, type BucketAccess, type BucketAction } from '../shared/manifest/access';
import { config } from '../shared/config';
import { AwsServiceError } from '../shared/aws/signed-call';
import { ENCRYPTION_CONTEXT } from '../shared/secrets/kms';

/** The sealer's encryption context pairs, each present, as the IAM condition on the sealing key requires. */
const sealerContext = (ctx: Record<string, string> | undefined): boolean => !!ctx && Object.entries(ENCRYPTION_CONTEXT).every(([k, v]) => ctx[k] === v);
import { setLocalAnswerCheck, setLocalCallCheck } from '../shared/observability/invocation';

/** What one function was granted (its manifest entry). */
export interface Grants {
  fn: string;
  table?: 'read' | 'write';
  /** UpdateItem on the request-count partitions (read routes with a rate limit). */
  requestCounting?: boolean;
  /** UpdateItem on the held-wait slots (long-poll read routes: shared/long-poll-slots.ts). */
  waitSlots?: boolean;
  bucket?: BucketAccess;
  sendTo?: readonly string[];
  /** The queue a consumer reads (it may change its messages' visibility). */
  consumes?: string;
  kms?: 'encrypt' | 'decrypt' | 'encrypt-decrypt';
  transcribe?: boolean;
  /** sts:AssumeRole on the upload-signing role (UPLOAD_SIGNER_ROLE_ARN). */
  uploadSigner?: boolean;
  bedrock?: boolean;
  sms?: boolean;
  /**
   * The invocation's trace header (a queue consumer's: local/lineage.ts), which the SDK puts on
   * every request deployed and SQS keeps with each message the invocation sends.
   */
  traceHeader?: string;
}

/** Thrown locally where the deployed role would get 403 AccessDenied. */
export class AccessDenied extends Error {
  readonly $metadata = { httpStatusCode: 403 };
  constructor(message: string) {
    super(message);
    this.name = 'AccessDenied';
  }
}

// ---- bucket ----

export type { BucketAction };

/**
 * True when a function with bucket access `mode` (undefined: none) may do `action` on `key` (null:
 * the bucket). With `transcribe`, also what Amazon Transcribe does with the caller's permissions
 * (lib/constructs/grants.ts `grantTranscribe`): read uploads, write under transcripts/.
 */
export function allows(mode: BucketAccess | undefined, action: BucketAction, key: string | null, opts: { transcribe?: boolean } = {}): boolean {
  if (opts.transcribe && key !== null) {
    if (action === 's3:GetObject' && key.startsWith(BUCKET_PREFIXES.uploads)) return true;
    if (action === 's3:PutObject' && key.startsWith(BUCKET_PREFIXES.transcripts)) return true;
  }
  if (!mode) return false;
  const g = BUCKET_GRANTS[mode];
  if (action === 's3:ListBucket') return g.list && key === null;
  return key !== null && g.objects.some((o) => o.actions.includes(action) && (o.prefix === null || key.startsWith(o.prefix)));
}

interface S3Input {
  Key?: string;
  Delete?: { Objects?: { Key?: string }[] };
}

/** The action each S3 command needs, and the keys it touches. */
const S3_COMMANDS: Record<string, { action: BucketAction; keys: (input: S3Input) => (string | null)[] }> = {
  GetObjectCommand: { action: 's3:GetObject', keys: (i) => [i.Key ?? null] },
  HeadObjectCommand: { action: 's3:GetObject', keys: (i) => [i.Key ?? null] },
  GetObjectTaggingCommand: { action: 's3:GetObjectTagging', keys: (i) => [i.Key ?? null] },
  ListObjectsV2Command: { action: 's3:ListBucket', keys: () => [null] },
  PutObjectCommand: { action: 's3:PutObject', keys: (i) => [i.Key ?? null] },
  CreateMultipartUploadCommand: { action: 's3:PutObject', keys: (i) => [i.Key ?? null] },
  UploadPartCommand: { action: 's3:PutObject', keys: (i) => [i.Key ?? null] },
  CompleteMultipartUploadCommand: { action: 's3:PutObject', keys: (i) => [i.Key ?? null] },
  AbortMultipartUploadCommand: { action: 's3:AbortMultipartUpload', keys: (i) => [i.Key ?? null] },
  PutObjectTaggingCommand: { action: 's3:PutObjectTagging', keys: (i) => [i.Key ?? null] },
  DeleteObjectCommand: { action: 's3:DeleteObject', keys: (i) => [i.Key ?? null] },
  DeleteObjectsCommand: { action: 's3:DeleteObject', keys: (i) => (i.Delete?.Objects ?? []).map((o) => o.Key ?? null) },
};

function checkBucket(g: Grants, command: string, input: S3Input): void {
  const c = S3_COMMANDS[command];
  if (!c) throw new AccessDenied(`${g.fn}: ${command} is not an S3 operation any function of the stack is granted`);
  for (const key of c.keys(input)) {
    if (!allows(g.bucket, c.action, key, { transcribe: g.transcribe })) {
      throw new AccessDenied(`${g.fn} is not authorized to perform ${c.action} on ${key ?? 'the bucket'} (bucket access: ${g.bucket ?? 'none'})`);
    }
  }
}

// ---- table ----

const TABLE_READS = new Set(['GetItemCommand', 'BatchGetItemCommand', 'QueryCommand', 'ScanCommand', 'TransactGetItemsCommand', 'DescribeTableCommand']);

/** A key attribute as the document client (a string) or the raw client (`{S: …}`) passes it. */
const keyString = (v: unknown): string | null => (typeof v === 'string' ? v : typeof (v as { S?: unknown })?.S === 'string' ? (v as { S: string }).S : null);

/** Words of the expression grammar (and its functions) that are not attribute names. */
const EXPRESSION_WORDS = new Set(
  ['set', 'remove', 'add', 'delete', 'and', 'or', 'not', 'between', 'in', 'if_not_exists', 'list_append', 'attribute_exists', 'attribute_not_exists', 'attribute_type', 'begins_with', 'contains', 'size'],
);

interface UpdateInput {
  Key?: Record<string, unknown>;
  UpdateExpression?: string;
  ConditionExpression?: string;
  ExpressionAttributeNames?: Record<string, string>;
  AttributeUpdates?: Record<string, unknown>;
  Expected?: Record<string, unknown>;
}

/**
 * The top-level attribute names an UpdateItem names, as `dynamodb:Attributes` sees them: its key's,
 * those of its update and condition expressions (a `#name` resolved, a path's first element only),
 * and those of the legacy parameters.
 */
export function attributesNamed(input: UpdateInput): Set<string> {
  const names = new Set<string>([...Object.keys(input.Key ?? {}), ...Object.keys(input.AttributeUpdates ?? {}), ...Object.keys(input.Expected ?? {})]);
  const subst = input.ExpressionAttributeNames ?? {};
  for (const expr of [input.UpdateExpression, input.ConditionExpression]) {
    // A name not after a word character, `.`, `]`, `:` or `#`: skips values and nested path parts.
    for (const [, token] of (expr ?? '').matchAll(/(?<![\w.\]:#])(#?[A-Za-z_]\w*)/g)) {
      if (token!.startsWith('#')) names.add(subst[token!] ?? token!);
      else if (!EXPRESSION_WORDS.has(token!.toLowerCase())) names.add(token!);
    }
  }
  return names;
}

function checkTable(g: Grants, command: string, input: { Key?: { PK?: unknown } } & UpdateInput): void {
  if (g.table === 'write' || TABLE_READS.has(command)) {
    if (!g.table) throw new AccessDenied(`${g.fn} has no access to the table (${command})`);
    return;
  }
  const pk = keyString(input.Key?.PK);
  if (command === 'UpdateItemCommand' && g.waitSlots && pk && WAIT_SLOT_PARTITIONS.some((p) => pk.startsWith(p.slice(0, -1)))) {
    const other = [...attributesNamed(input)].filter((a) => !WAIT_SLOT_ATTRIBUTES.includes(a));
    if (other.length) throw new AccessDenied(`${g.fn} may write only the wait slots' attributes, not ${other.join(', ')}`);
    return;
  }
  if (command === 'UpdateItemCommand' && g.requestCounting) {
    if (!pk || !REQUEST_COUNT_PARTITIONS.some((p) => pk.startsWith(p.slice(0, -1)))) {
      throw new AccessDenied(`${g.fn} may update only the request-count partitions (${REQUEST_COUNT_PARTITIONS.join(', ')}), not ${pk ?? 'this item'}`);
    }
    const other = [...attributesNamed(input)].filter((a) => !REQUEST_COUNT_ATTRIBUTES.includes(a));
    if (other.length) throw new AccessDenied(`${g.fn} may write only the request counters' attributes, not ${other.join(', ')}`);
    return;
  }
  throw new AccessDenied(`${g.fn} is not authorized to perform dynamodb:${command.replace(/Command$/, '')} (table access: ${g.table ?? 'none'})`);
}

// ---- queues ----

function queueName(url: unknown): string {
  const known = Object.entries(config().queueUrls).find(([, u]) => u === url)?.[0];
  return known ?? String(url).split('/').pop() ?? '';
}

function checkQueue(g: Grants, command: string, input: { QueueUrl?: string; QueueName?: string }): void {
  const name = input.QueueName ?? queueName(input.QueueUrl);
  if ((command === 'SendMessageCommand' || command === 'SendMessageBatchCommand' || command === 'GetQueueUrlCommand') && g.sendTo?.includes(name)) return;
  if ((command === 'ChangeMessageVisibilityCommand' || command === 'GetQueueUrlCommand') && g.consumes === name) return;
  throw new AccessDenied(`${g.fn} is not authorized to perform sqs:${command.replace(/Command$/, '')} on queue ${name || '(unknown)'}`);
}

// ---- other services ----

/** The models the stack grants (context `bedrockModelId`, `annotationModelId`), as the code resolves them here. */
function grantedModels(): string[] {
  const scoring = process.env.BEDROCK_MODEL_ID ?? DEFAULT_BEDROCK_MODEL_ID;
  return [scoring, process.env.ANNOTATION_MODEL_ID ?? scoring];
}

interface ServiceInput {
  EncryptionContext?: Record<string, string>;
  modelId?: string;
  TranscriptionJobName?: string;
  RoleArn?: string;
  PhoneNumber?: string;
  TopicArn?: string;
  TargetArn?: string;
}

/**
 * Per client: the operations a grant allows (as lib/constructs/grants.ts grants them, resources
 * included: the configured models, our transcription job names), and whether this function has it.
 */
const SERVICE_GRANTS: Record<string, { service: string; allowed: (g: Grants, command: string, input: ServiceInput) => boolean }> = {
  KMSClient: {
    service: 'kms',
    // GenerateDataKey and Decrypt only, each with the sealer's encryption context (the IAM condition).
    allowed: (g, c, i) =>
      sealerContext(i.EncryptionContext) &&
      (c === 'GenerateDataKeyCommand'
        ? g.kms === 'encrypt' || g.kms === 'encrypt-decrypt'
        : c === 'DecryptCommand' && (g.kms === 'decrypt' || g.kms === 'encrypt-decrypt')),
  },
  BedrockRuntimeClient: {
    service: 'bedrock',
    allowed: (g, c, i) => g.bedrock === true && /^(Converse|ConverseStream|InvokeModel|InvokeModelWithResponseStream)Command$/.test(c) && grantedModels().includes(i.modelId ?? ''),
  },
  TranscribeClient: {
    service: 'transcribe',
    allowed: (g, c, i) => g.transcribe === true && c === 'StartTranscriptionJobCommand' && (i.TranscriptionJobName ?? '').startsWith(TRANSCRIBE_JOB_PREFIX),
  },
  // To a phone number only: the stack denies Publish on every SNS ARN (topics, platform endpoints).
  SNSClient: { service: 'sns', allowed: (g, c, i) => g.sms === true && c === 'PublishCommand' && !!i.PhoneNumber && !i.TopicArn && !i.TargetArn },
  STSClient: {
    service: 'sts',
    allowed: (g, c, i) => g.uploadSigner === true && c === 'AssumeRoleCommand' && !!i.RoleArn && i.RoleArn === process.env.UPLOAD_SIGNER_ROLE_ARN,
  },
};

function checkService(g: Grants, client: string, command: string, input: ServiceInput): void {
  const s = SERVICE_GRANTS[client];
  if (!s) throw new AccessDenied(`${g.fn}: ${client.replace(/Client$/, '')} is not a service any function of the stack is granted (${command})`);
  if (!s.allowed(g, command, input)) throw new AccessDenied(`${g.fn} is not authorized to perform ${s.service}:${command.replace(/Command$/, '')}${input.modelId ? ` on model ${input.modelId}` : ''}${input.TranscriptionJobName ? ` on job ${input.TranscriptionJobName}` : ''}`);
}

// ---- the check ----

const store = contextStore<Grants>();

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
