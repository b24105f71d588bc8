import { Stack, aws_dynamodb as dynamodb, aws_iam as iam, aws_lambda as lambda, aws_s3 as s3, aws_sqs as sqs } from 'aws-cdk-lib';

/**
 * Grant helpers: each binds a resource to a function in one call, least privilege plus the
 * environment variable `shared/config.ts` reads, so a grant and its variable never drift apart.
 */

export type TableAccess = 'read' | 'write';
export type BucketAccess = 'read' | 'write' | 'read-write';

/** `read`: Get/Query/Scan/BatchGet/ConditionCheck/Describe only. `write`: read plus Put/Update/Delete/BatchWrite. */
export function bindTable(fn: lambda.Function, table: dynamodb.ITable, mode: TableAccess): void {
  if (mode === 'read') table.grantReadData(fn);
  else table.grantReadWriteData(fn);
  fn.addEnvironment('TABLE_NAME', table.tableName);
}

/**
 * `read`: get objects (pre-signed GETs are signed with this role, so it needs s3:GetObject).
 * `write`: put objects only (pre-signed PUTs and direct uploads). `read-write`: both, plus delete.
 */
export function bindBucket(fn: lambda.Function, bucket: s3.IBucket, mode: BucketAccess): void {
  switch (mode) {
    case 'read':
      bucket.grantRead(fn);
      break;
    case 'write':
      bucket.grantPut(fn);
      break;
    case 'read-write':
      bucket.grantReadWrite(fn);
      break;
  }
  fn.addEnvironment('BUCKET_NAME', bucket.bucketName);
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

/**
 * Model invocation on foundation models of the stack's region only (no provisioned throughput,
 * no agents, no model management). The Converse API is authorised by `bedrock:InvokeModel`
 * (ConverseStream by `bedrock:InvokeModelWithResponseStream`); there is no separate IAM action.
 * A cross-region inference profile would need its `inference-profile` ARN added here.
 */
export function grantBedrockInvoke(fn: lambda.Function): void {
  const stack = Stack.of(fn);
  fn.addToRolePolicy(
    new iam.PolicyStatement({
      sid: 'InvokeFoundationModels',
      actions: ['bedrock:InvokeModel', 'bedrock:InvokeModelWithResponseStream'],
      resources: [stack.formatArn({ service: 'bedrock', account: '', resource: 'foundation-model', resourceName: '*' })],
    }),
  );
}

/**
 * SMS for phone verification (D7): SNS publishes directly to a phone number, which has no resource
 * ARN, so the statement's resource is `*`; it is given only to routes whose manifest entry says
 * `access.sms`.
 */
export function grantSms(fn: lambda.Function): void {
  fn.addToRolePolicy(
    new iam.PolicyStatement({
      sid: 'SendSmsDirectToPhone',
      actions: ['sns:Publish'],
      resources: ['*'],
    }),
  );
}

/**
 * Amazon Transcribe on the media bucket (D65), for functions whose manifest entry says
 * `access.transcribe`: `transcribe:StartTranscriptionJob` on our job names only, and the S3 access
 * the service uses on the caller's behalf (Transcribe reads the media and writes the output with
 * the caller's permissions): read under `uploads/`, write under `transcripts/`.
 */
export function grantTranscribe(fn: lambda.Function, bucket: s3.IBucket, prefixes: { media: string; output: string; jobName: string }): void {
  const stack = Stack.of(fn);
  fn.addToRolePolicy(
    new iam.PolicyStatement({
      sid: 'StartTranscriptionJobs',
      actions: ['transcribe:StartTranscriptionJob'],
      resources: [stack.formatArn({ service: 'transcribe', resource: 'transcription-job', resourceName: `${prefixes.jobName}*` })],
    }),
  );
  fn.addToRolePolicy(
    new iam.PolicyStatement({
      sid: 'TranscribeReadsMedia',
      actions: ['s3:GetObject'],
      resources: [bucket.arnForObjects(`${prefixes.media}*`)],
    }),
  );
  fn.addToRolePolicy(
    new iam.PolicyStatement({
      sid: 'TranscribeWritesOutput',
      actions: ['s3:PutObject'],
      resources: [bucket.arnForObjects(`${prefixes.output}*`)],
    }),
  );
}
