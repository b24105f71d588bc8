import {
  aws_dynamodb as dynamodb,
  aws_iam as iam,
  aws_lambda as lambda,
  aws_s3 as s3,
  aws_sqs as sqs,
} from 'aws-cdk-lib';
import { BUCKET_GRANTS, IDEMPOTENCY_ACTIONS, IDEMPOTENCY_PARTITIONS, REQUEST_COUNT_ATTRIBUTES, REQUEST_COUNT_PARTITIONS, WAIT_SLOT_ATTRIBUTES, WAIT_SLOT_PARTITIONS, type BucketAccess } from '../../shared/manifest/access';
import { acknowledge } from './nag';
import { nagReference } from './nag-reference';

/**
 * Grant helpers: each binds a resource to a function in one call, least privilege plus the
 * environment variable `shared/config.ts` reads, so a grant and its variable never drift apart.
 */

export type TableAccess = 'none' | 'read' | 'write';
export type { BucketAccess };

/** `none`: no action, the table's name only. `read`: Get/Query/Scan/BatchGet/ConditionCheck/Describe only. `write`: read plus Put/Update/Delete/BatchWrite. */
export function bindTable(fn: lambda.Function, table: dynamodb.ITable, mode: TableAccess): void {
  fn.addEnvironment('TABLE_NAME', table.tableName);
  if (mode === 'none') return; // the name only: the middlewares' configuration reads it
  if (mode === 'read') table.grantReadData(fn);
  else table.grantReadWriteData(fn);
  acknowledge(fn, `AwsSolutions-IAM5[Resource::${nagReference(fn, table)}/index/*]`, 'The indexes of the one table (single-table design).');
}

/** Routes that write already hold UpdateItem on the whole table (REQUEST_COUNT_PARTITIONS: shared/manifest/access.ts). */
export { REQUEST_COUNT_PARTITIONS };

/**
 * A read route's request count: UpdateItem only on the request-count partitions
 * (`dynamodb:LeadingKeys`) and only naming the counters' attributes (`dynamodb:Attributes`,
 * REQUEST_COUNT_ATTRIBUTES), so the role cannot change a secret's scopes or an organization's
 * balance. Both conditions must hold. `ReturnValues` is not narrowed: authentication reads the
 * counted secret item back (ALL_NEW), which the role may read anyway.
 */
export function bindRequestCounting(fn: lambda.Function, table: dynamodb.ITable): void {
  grantNarrowUpdates(fn, table, REQUEST_COUNT_PARTITIONS, REQUEST_COUNT_ATTRIBUTES);
}

/** UpdateItem on the items whose partition key matches `partitions`, naming only `attributes`. */
function grantNarrowUpdates(fn: lambda.Function, table: dynamodb.ITable, partitions: readonly string[], attributes: readonly string[]): void {
  fn.addToRolePolicy(
    new iam.PolicyStatement({
      actions: ['dynamodb:UpdateItem'],
      resources: [table.tableArn],
      conditions: {
        'ForAllValues:StringLike': { 'dynamodb:LeadingKeys': [...partitions] },
        'ForAllValues:StringEquals': { 'dynamodb:Attributes': [...attributes] },
      },
    }),
  );
}

/**
 * A long-poll route's held-wait slots (shared/long-poll-slots.ts): UpdateItem only on the slot
 * items (`LPW#…`) and only naming their keys and slots. Both conditions must hold.
 */
export function bindWaitSlots(fn: lambda.Function, table: dynamodb.ITable): void {
  grantNarrowUpdates(fn, table, WAIT_SLOT_PARTITIONS, WAIT_SLOT_ATTRIBUTES);
}

/**
 * A read route's idempotency records (a route that takes an Idempotency-Key but changes nothing
 * else, e.g. `files.refresh_url`): put, update and delete only the items under `IDEM#…`
 * (`dynamodb:LeadingKeys`), so the role cannot write a file, a job or a balance.
 */
export function bindIdempotencyRecords(fn: lambda.Function, table: dynamodb.ITable): void {
  fn.addToRolePolicy(
    new iam.PolicyStatement({
      actions: [...IDEMPOTENCY_ACTIONS],
      resources: [table.tableArn],
      conditions: { 'ForAllValues:StringLike': { 'dynamodb:LeadingKeys': [...IDEMPOTENCY_PARTITIONS] } },
    }),
  );
}

/**
 * `transcripts`: get Transcribe's output documents under `transcripts/` (and list, so a missing
 * one answers 404).
 * `write`: s3:PutObject and s3:PutObjectTagging on upload objects only (the upload and retry
 * routes' direct uploads, whose pre-signed PUTs are signed with the upload-signing role instead
 * (`UploadSigner`), and the `verdict` tag of a rejection the request
 * itself decides: the fan-in can complete there): no delete, no retention or legal hold, and
 * nothing outside `uploads/` (exports and keyframes are what buyers download). A pre-signed PUT
 * cannot carry a tag: it signs its headers, and S3 refuses unsigned `x-amz-*` ones.
 * `delete`: delete the objects of withdrawn Files (under `uploads/` and `keyframes/`). `tag`: set the tags of upload objects only (the verdict tag the
 * lifecycle rules read), nothing else. `score`, `annotate`, `export`: the pipeline consumers'
 * actions, each on its prefixes only (shared/manifest/access.ts `BUCKET_GRANTS`, which these
 * statements are made from, for every mode: no CDK bucket grant with its wildcards).
 * local/grants.ts states the same per action; the local runtime enforces it there
 * (test/cdk/stack.test.ts checks that both agree).
 */
export function bindBucket(fn: lambda.Function, bucket: s3.IBucket, mode: BucketAccess): void {
  const g = BUCKET_GRANTS[mode];
  for (const o of g.objects) {
    if (o.prefix === null) throw new Error(`bucket mode ${mode}: every grant names its key prefix`);
    onObjects(fn, bucket, o.prefix, o.actions);
  }
  if (g.list) fn.addToRolePolicy(new iam.PolicyStatement({ actions: ['s3:ListBucket'], resources: [bucket.bucketArn] }));
  fn.addEnvironment('BUCKET_NAME', bucket.bucketName);
}

/** S3 actions on the bucket's objects under one prefix only (e.g. `uploads/*`). */
function onObjects(fn: lambda.Function, bucket: s3.IBucket, prefix: string, actions: readonly string[]): void {
  fn.addToRolePolicy(new iam.PolicyStatement({ actions: [...actions], resources: [bucket.arnForObjects(`${prefix}*`)] }));
  acknowledge(fn, `AwsSolutions-IAM5[Resource::${nagReference(fn, bucket)}/${prefix}*]`, `Objects under ${prefix} of the media bucket (keys are per submission, file or export, not known in advance).`);
}

/** Environment variable carrying a queue's URL: `QUEUE_URL_<NAME>`, upper case, `-` → `_`. */
export function queueUrlVariable(queueName: string): string {
  return `QUEUE_URL_${queueName.toUpperCase().replace(/-/g, '_')}`;
}

/** Send (not receive, not delete) on one queue, and its URL under `QUEUE_URL_<NAME>`. */
export function bindQueue(fn: lambda.Function, queueName: string, queue: sqs.IQueue): void {
  queue.grantSendMessages(fn);
  fn.addEnvironment(queueUrlVariable(queueName), queue.queueUrl);
}

// The other grants, each in its module: services (Bedrock, SMS, Transcribe), a function's keys, the upload-signing role.
export { grantBedrockInvoke, grantSms, grantTranscribe } from './service-grants';
export { bindKeyAccess, secretsExtension, type CdnResources, type KeyResources } from './key-access';
export { UploadSigner } from './upload-signer';
