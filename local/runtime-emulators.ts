/**
 * The local runtime's emulators, started in turn by startRuntime (local/runtime.ts): DynamoDB Local
 * (unless one already runs), the SQS emulator with the wiring's queues, and the STS and S3
 * emulators, whose object-created events go to the EventBridge rules. Each pushes its stops.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { SQSClient } from '@aws-sdk/client-sqs';
import { QUEUES } from '../shared/manifest/wiring';
import { startDynamoDbLocal, type DynamoDbLocal } from './dynamodb';
import type { EventRouter } from './eventbridge';
import { LOCAL_ACCOUNT_ID } from './lambda';
import { S3_LOCAL_CREDENTIALS, startS3Emulator, type S3Emulator } from './s3';
import { createQueues, localSqsClient, startSqsEmulator, type LocalQueue, type SqsEmulator } from './sqs';
import { IssuedCredentials, startStsEmulator, type StsEmulator } from './sts';
import type { StartContext } from './runtime-options';

/** Told when an emulator child exits on its own (startRuntime's `childDied`). */
export type ChildDied = (what: string, code: number | null) => void;

/** DynamoDB Local, unless `opts.dynamoEndpoint` names one already running (then `dynamo` is null). */
export async function startDynamoDb(ctx: StartContext, childDied: ChildDied): Promise<{ dynamo: DynamoDbLocal | null; dynamoEndpoint: string }> {
  const { opts, dataDir, stops } = ctx;
  let dynamo: DynamoDbLocal | null = null;
  if (!opts.dynamoEndpoint) {
    dynamo = await startDynamoDbLocal({ dbPath: dataDir ? join(dataDir, 'dynamodb') : undefined });
    stops.push(() => dynamo!.stop());
    dynamo.onUnexpectedExit((code) => childDied('DynamoDB Local', code));
  }
  const dynamoEndpoint = opts.dynamoEndpoint ?? dynamo!.endpoint;
  return { dynamo, dynamoEndpoint };
}

/** The SQS emulator (fauxqs), its client, and the wiring's queues created in it. */
export async function startSqs(
  ctx: StartContext,
  childDied: ChildDied,
): Promise<{ sqsEmulator: SqsEmulator; sqs: SQSClient; sandboxDelay: number | undefined; queues: Map<string, LocalQueue> }> {
  const { opts, host, stops } = ctx;
  const sqsEmulator = await startSqsEmulator({ host });
  stops.push(() => sqsEmulator.stop());
  sqsEmulator.onUnexpectedExit((code) => childDied('the SQS emulator (fauxqs)', code));
  const sqs = localSqsClient(sqsEmulator.endpoint);
  stops.push(() => sqs.destroy());
  const sandboxDelay = opts.sandboxDelaySeconds ?? (process.env.SANDBOX_DELAY_SECONDS ? Number(process.env.SANDBOX_DELAY_SECONDS) : undefined);
  const queues = await createQueues(sqs, QUEUES, sandboxDelay !== undefined ? { sandbox: sandboxDelay } : {});
  return { sqsEmulator, sqs, sandboxDelay, queues };
}

/** The STS emulator (the upload-signing role) and the S3 emulator, whose new objects `router` routes. */
export async function startStorage(
  ctx: StartContext,
  router: EventRouter,
): Promise<{ s3Dir: string; sts: StsEmulator; s3: S3Emulator; uploadSignerRoleArn: string }> {
  const { log, host, dataDir, bucketName, region, stops } = ctx;
  const s3Dir = dataDir ? join(dataDir, 's3') : mkdtempSync(join(tmpdir(), 'local-s3-'));
  if (!dataDir) stops.push(() => rmSync(s3Dir, { recursive: true, force: true }));
  // The upload-signing role's credentials (pre-signed upload URLs), issued by the STS emulator and
  // accepted by the S3 front until they expire, as STS's are by S3.
  const issued = new IssuedCredentials(dataDir ? join(dataDir, 'sts-credentials.json') : undefined);
  const uploadSignerRoleArn = `arn:aws:iam::${LOCAL_ACCOUNT_ID}:role/local-upload-signer`;
  const sts = await startStsEmulator({ host, region, account: LOCAL_ACCOUNT_ID, roleArn: uploadSignerRoleArn, credentials: S3_LOCAL_CREDENTIALS, issued });
  stops.push(() => sts.stop());
  const s3 = await startS3Emulator({
    directory: s3Dir,
    temporaryCredentials: issued,
    portFile: dataDir ? join(dataDir, 's3-port') : undefined, // pre-signed upload URLs outlive a restart
    bucket: bucketName,
    host,
    account: LOCAL_ACCOUNT_ID,
    region,
    onObjectCreated: (event) => {
      router.route(event).catch((err: Error) => log.error(`eventbridge: delivery failed: ${err.message}`));
    },
  });
  stops.push(() => s3.stop());
  return { s3Dir, sts, s3, uploadSignerRoleArn };
}
