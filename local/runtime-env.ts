/**
 * The handlers' environment in the local runtime (startRuntime, local/runtime.ts): what they read
 * through shared/config (the emulators' endpoints, the table, bucket and queues, the secrets file,
 * the public and CDN URLs, the long-poll limits), set before any handler module loads, with the
 * shared clients and caches of an earlier runtime in this process reset.
 */
import { resetClients } from '../shared/db/client';
import { resetConfig } from '../shared/config';
import { resetSecrets } from '../shared/secrets';
import { resetSealer } from '../shared/secrets/sealer';
import { resetS3 } from '../shared/storage/s3';
import { deployedLongPollMaxWaits, deployedLongPollMaxWaitsPerOrg } from './deployed-settings';
import type { DynamoDbLocal } from './dynamodb';
import { S3_LOCAL_CREDENTIALS, type S3Emulator } from './s3';
import { ensureLocalSecrets } from './secrets';
import { queueUrlEnvName, type LocalQueue, type SqsEmulator } from './sqs';
import type { StsEmulator } from './sts';
import type { StartContext } from './runtime-options';

/** What the runtime has started by the time the handlers' environment is set. */
export interface StartedParts {
  /** Our DynamoDB Local (null: an already running one at `dynamoEndpoint`). */
  dynamo: DynamoDbLocal | null;
  dynamoEndpoint: string;
  sqsEmulator: SqsEmulator;
  queues: Map<string, LocalQueue>;
  sandboxDelay: number | undefined;
  sts: StsEmulator;
  s3: S3Emulator;
  uploadSignerRoleArn: string;
  /** The HTTP front's URL. */
  url: string;
  longPollSeconds: number;
}

/** Sets the handlers' environment in process.env (no AWS profile or session token left) and resets what read the last one. */
export function setHandlerEnvironment(ctx: StartContext, parts: StartedParts): void {
  const { opts, dataDir, tableName, bucketName, region } = ctx;
  const { dynamo, dynamoEndpoint, sqsEmulator, queues, sandboxDelay, sts, s3, uploadSignerRoleArn, url, longPollSeconds } = parts;
  // Secrets live in the data folder (D63), generated once and kept across restarts.
  const secrets = ensureLocalSecrets(dataDir, opts.cursorSecret ? { cursor: opts.cursorSecret } : {});
  // The handlers read these through shared/config; set them before any handler module loads.
  const env: Record<string, string> = {
    RUNTIME: 'local',
    AWS_REGION: region,
    AWS_ACCESS_KEY_ID: S3_LOCAL_CREDENTIALS.accessKeyId,
    AWS_SECRET_ACCESS_KEY: S3_LOCAL_CREDENTIALS.secretAccessKey,
    TABLE_NAME: tableName,
    BUCKET_NAME: bucketName,
    DYNAMODB_ENDPOINT: dynamoEndpoint,
    // Our DynamoDB Local on disk: make committed transactions survive a SIGKILL (shared/db/client).
    LOCAL_DYNAMODB_DURABLE_TRANSACTIONS: dynamo && dataDir ? '1' : '0',
    S3_ENDPOINT: s3.endpoint,
    SQS_ENDPOINT: sqsEmulator.endpoint,
    STS_ENDPOINT: sts.endpoint,
    UPLOAD_SIGNER_ROLE_ARN: uploadSignerRoleArn,
    LOCAL_SECRETS_FILE: secrets.file,
    PUBLIC_BASE_URL: opts.publicBaseUrl ?? url,
    // D60: download URLs are signed for the local CDN (local/cdn.ts) with the persisted key.
    CDN_BASE_URL: `${(opts.publicBaseUrl ?? url).replace(/\/+$/, '')}/cdn`,
    CDN_KEY_PAIR_ID: secrets.values['cdn-key-pair-id']!,
    // What the stack gives the long-poll routes (lib/domain-stack.ts): the wait is clamped to it.
    LONG_POLL_MAX_SECONDS: String(longPollSeconds),
    LONG_POLL_MAX_WAITS: String(opts.longPollMaxWaits?.total ?? deployedLongPollMaxWaits()),
    LONG_POLL_MAX_WAITS_PER_ORG: String(opts.longPollMaxWaits?.perOrg ?? deployedLongPollMaxWaitsPerOrg()),
  };
  for (const q of queues.values()) env[queueUrlEnvName(q.def.name)] = q.url;
  if (sandboxDelay !== undefined) env.SANDBOX_DELAY_SECONDS = String(sandboxDelay);
  delete process.env.AWS_PROFILE; // the local process must never reach a real account
  delete process.env.AWS_SESSION_TOKEN;
  Object.assign(process.env, env);
  resetConfig();
  resetSecrets();
  resetSealer();
  resetClients();
  resetS3(); // a client of an earlier runtime in this process would talk to its (stopped) S3
}
