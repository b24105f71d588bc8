/**
 * Grants of the services a manifest entry's `access` names beyond the table, bucket and queues:
 * Bedrock model invocation, SMS by SNS (D7) and Amazon Transcribe (D65). Re-exported by grants.ts.
 */
import { Aws, Stack, aws_iam as iam, aws_lambda as lambda, aws_s3 as s3 } from 'aws-cdk-lib';
import { acknowledge } from './nag';
import { nagReference } from './nag-reference';
import { TRANSCRIBE_JOB_PREFIX, BUCKET_PREFIXES } from '../../shared/manifest/wiring';

/**
 * Model invocation on the configured models only (context `bedrockModelId`, `annotationModelId`):
 * no provisioned throughput, no agents, no model management. The Converse API is authorised by
 * `bedrock:InvokeModel` (ConverseStream by `bedrock:InvokeModelWithResponseStream`). A model id
 * with a geography prefix (`us.`, `eu.`, `apac.`, `global.`) is a cross-region inference profile:
 * the profile of this account and region, and the foundation model in whichever region the
 * profile routes to.
 */
export function grantBedrockInvoke(fn: lambda.Function, modelIds: readonly string[]): void {
  const stack = Stack.of(fn);
  const resources = new Set<string>();
  for (const id of modelIds) {
    const profile = /^(us|eu|apac|global|us-gov)\.(.+)$/.exec(id);
    if (profile) {
      resources.add(stack.formatArn({ service: 'bedrock', resource: 'inference-profile', resourceName: id }));
      resources.add(`arn:${stack.partition}:bedrock:*::foundation-model/${profile[2]}`);
    } else {
      resources.add(stack.formatArn({ service: 'bedrock', account: '', resource: 'foundation-model', resourceName: id }));
    }
  }
  fn.addToRolePolicy(
    new iam.PolicyStatement({
      sid: 'InvokeConfiguredModels',
      actions: ['bedrock:InvokeModel', 'bedrock:InvokeModelWithResponseStream'],
      resources: [...resources],
    }),
  );
}

/**
 * SMS for phone verification (D7): SNS publishes directly to a phone number, which has no resource
 * ARN, so the statement's resource is `*`; it is given only to routes whose manifest entry says
 * `access.sms`. A second statement denies Publish on every SNS ARN (topics, platform endpoints), so
 * `*` reaches phone numbers and nothing else: the function cannot publish to a topic of the account.
 */
export function grantSms(fn: lambda.Function): void {
  acknowledge(fn, 'AwsSolutions-IAM5[Resource::*]', 'SNS publishes SMS to a phone number, which has no ARN; Publish on any SNS ARN is denied.');
  fn.addToRolePolicy(
    new iam.PolicyStatement({
      sid: 'SendSmsDirectToPhone',
      actions: ['sns:Publish'],
      resources: ['*'],
    }),
  );
  fn.addToRolePolicy(
    new iam.PolicyStatement({
      sid: 'NoPublishToTopicsOrEndpoints',
      effect: iam.Effect.DENY,
      actions: ['sns:Publish'],
      resources: [`arn:${Aws.PARTITION}:sns:*:*:*`],
    }),
  );
}

/**
 * Amazon Transcribe on the media bucket (D65), for functions whose manifest entry says
 * `access.transcribe`: `transcribe:StartTranscriptionJob` on our job names only (the completion
 * arrives as an EventBridge event, so nothing reads or deletes jobs), and the S3 access the
 * service uses on the caller's behalf (Transcribe reads the media and writes its output with the
 * caller's permissions): read under `uploads/`, write under `transcripts/` of the media bucket.
 */
export function grantTranscribe(fn: lambda.Function, media?: s3.IBucket): void {
  const stack = Stack.of(fn);
  acknowledge(fn, `AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:transcribe:<AWS::Region>:<AWS::AccountId>:transcription-job/${TRANSCRIBE_JOB_PREFIX}*]`, 'Job names are per file; the prefix limits them to ours.');
  fn.addToRolePolicy(
    new iam.PolicyStatement({
      sid: 'StartTranscriptionJobs',
      actions: ['transcribe:StartTranscriptionJob'],
      resources: [stack.formatArn({ service: 'transcribe', resource: 'transcription-job', resourceName: `${TRANSCRIBE_JOB_PREFIX}*` })],
    }),
  );
  if (!media) return;
  acknowledge(fn, `AwsSolutions-IAM5[Resource::${nagReference(fn, media)}/${BUCKET_PREFIXES.uploads}*]`, 'Transcribe reads uploads of the media bucket with the caller\'s permissions.');
  acknowledge(fn, `AwsSolutions-IAM5[Resource::${nagReference(fn, media)}/${BUCKET_PREFIXES.transcripts}*]`, 'Transcribe writes its output under transcripts/ with the caller\'s permissions.');
  fn.addToRolePolicy(
    new iam.PolicyStatement({
      sid: 'TranscribeReadsMedia',
      actions: ['s3:GetObject'],
      resources: [media.arnForObjects(`${BUCKET_PREFIXES.uploads}*`)],
    }),
  );
  fn.addToRolePolicy(
    new iam.PolicyStatement({
      sid: 'TranscribeWritesOutput',
      actions: ['s3:PutObject'],
      resources: [media.arnForObjects(`${BUCKET_PREFIXES.transcripts}*`)],
    }),
  );
}
