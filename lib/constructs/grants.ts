import {
  Aws,
  type CfnElement,
  Duration,
  Names,
  Stack,
  aws_cloudfront as cloudfront,
  aws_dynamodb as dynamodb,
  aws_iam as iam,
  aws_kms as kms,
  aws_lambda as lambda,
  aws_s3 as s3,
  aws_secretsmanager as secretsmanager,
  aws_sqs as sqs,
} from 'aws-cdk-lib';
import { BUCKET_GRANTS, REQUEST_COUNT_ATTRIBUTES, REQUEST_COUNT_PARTITIONS, WAIT_SLOT_ATTRIBUTES, WAIT_SLOT_PARTITIONS, secretArnVariable, secretsRead, type BucketAccess, type KeyAccess, type SecretName } from '../../shared/manifest/access';
import { EXTENSION_TTL_SECONDS } from '../../shared/secrets';
import { ENCRYPTION_CONTEXT } from '../../shared/secrets/kms';
import type { Construct, IConstruct } from 'constructs';
import { acknowledge } from './nag';
import { BUCKET_PREFIXES, TRANSCRIBE_JOB_PREFIX } from '../../shared/manifest/wiring';

/**
 * Grant helpers: each binds a resource to a function in one call, least privilege plus the
 * environment variable `shared/config.ts` reads, so a grant and its variable never drift apart.
 */

export type TableAccess = 'read' | 'write';
export type { BucketAccess };

/** `read`: Get/Query/Scan/BatchGet/ConditionCheck/Describe only. `write`: read plus Put/Update/Delete/BatchWrite. */
export function bindTable(fn: lambda.Function, table: dynamodb.ITable, mode: TableAccess): void {
  if (mode === 'read') table.grantReadData(fn);
  else table.grantReadWriteData(fn);
  acknowledge(fn, `AwsSolutions-IAM5[Resource::${nagReference(fn, table)}/index/*]`, 'The indexes of the one table (single-table design).');
  fn.addEnvironment('TABLE_NAME', table.tableName);
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

/**
 * How cdk-nag names a resource reference in an IAM5 finding: `<LogicalId.Arn>` in the resource's
 * own stack, `<referenceto<RootStack><LogicalId>Arn>` from a nested stack (its parameter).
 */
function nagReference(scope: IConstruct, target: dynamodb.ITable | s3.IBucket): string {
  const owner = Stack.of(target);
  const cfn = target.node.defaultChild as CfnElement;
  if (Stack.of(scope) === owner) return `<${owner.resolve(owner.getLogicalId(cfn)) as string}.Arn>`;
  return `<referenceto${Names.uniqueId(cfn)}Arn>`;
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

/** What `bindKeyAccess` needs from the stack: the secrets and the sealing key, and the CDN. */
export interface KeyResources {
  secret(name: SecretName): secretsmanager.ISecret | undefined;
  readonly sealingKey: kms.IKey;
  readonly paymentsProvider: 'stripe' | 'disabled';
}
export interface CdnResources {
  readonly baseUrl: string;
  readonly publicKey: cloudfront.IPublicKey;
}

/**
 * The AWS Parameters and Secrets Lambda Extension (an AWS-published layer) for a function that
 * reads a secret of this deploy: shared/secrets asks its localhost endpoint, so the function
 * bundles no Secrets Manager client. Its cache TTL is the one shared/secrets counts with; a call
 * to Secrets Manager that hangs fails after 2 s instead of holding the request.
 */
export function secretsExtension(access: KeyAccess, keys: KeyResources): lambda.ParamsAndSecretsLayerVersion | undefined {
  if (!secretsRead(access).some((name) => keys.secret(name))) return undefined;
  return lambda.ParamsAndSecretsLayerVersion.fromVersion(lambda.ParamsAndSecretsVersions.V1_0_103, {
    cacheEnabled: true,
    secretsManagerTtl: Duration.seconds(EXTENSION_TTL_SECONDS),
    secretsManagerTimeout: Duration.seconds(2),
    logLevel: lambda.ParamsAndSecretsLogLevel.WARN,
  });
}

/**
 * D63: exactly what a manifest entry's `access` declares (shared/manifest/access.ts), with only
 * identifiers in the environment:
 * - `secrets`: GetSecretValue on each, its ARN in `SECRET_ARN_<NAME>`. `stripe` is skipped when
 *   the deploy has no Stripe secret (PAYMENTS_PROVIDER=disabled says so).
 * - `cdnSign`: the `cdn-signing-key` secret, `CDN_BASE_URL`, `CDN_KEY_PAIR_ID`.
 * - `kms`: encrypt (kms:GenerateDataKey), decrypt (kms:Decrypt), or both, on the sealing key and only with the
 *   sealer's encryption context; `KMS_KEY_ID`.
 * - `transcribe`: Amazon Transcribe jobs on the media bucket (grantTranscribe; pass `media`).
 * - `uploadSigner`: `sts:AssumeRole` on the upload-signing role only, whose trust policy admits
 *   this function's role (UploadSigner.admit; pass `signer`); its ARN in `UPLOAD_SIGNER_ROLE_ARN`.
 * Every function gets `PAYMENTS_PROVIDER` (`stripe` | `disabled`), which is not a secret.
 */
export function bindKeyAccess(fn: lambda.Function, access: KeyAccess, keys: KeyResources, cdn: CdnResources, media?: s3.IBucket, signer?: UploadSigner): void {
  for (const name of secretsRead(access)) {
    const secret = keys.secret(name);
    if (!secret) continue;
    fn.addToRolePolicy(
      new iam.PolicyStatement({
        actions: ['secretsmanager:GetSecretValue'],
        // An imported partial ARN matches the six characters Secrets Manager appends.
        resources: [secret.secretFullArn ?? `${secret.secretArn}-??????`],
      }),
    );
    fn.addEnvironment(secretArnVariable(name), secret.secretArn);
  }
  if (access.cdnSign) {
    fn.addEnvironment('CDN_BASE_URL', cdn.baseUrl);
    fn.addEnvironment('CDN_KEY_PAIR_ID', cdn.publicKey.publicKeyId);
  }
  // The sealer's two calls (shared/secrets/kms.ts), on the one sealing key, and only with the
  // sealer's encryption context (https://docs.aws.amazon.com/kms/latest/developerguide/conditions-kms.html#conditions-kms-encryption-context):
  // not the Encrypt, ReEncrypt* and GenerateDataKey* variants CDK's key grants give.
  const sealing = (action: string) =>
    new iam.PolicyStatement({
      actions: [action],
      resources: [keys.sealingKey.keyArn],
      conditions: { StringEquals: Object.fromEntries(Object.entries(ENCRYPTION_CONTEXT).map(([k, v]) => [`kms:EncryptionContext:${k}`, v])) },
    });
  if (access.kms === 'encrypt' || access.kms === 'encrypt-decrypt') fn.addToRolePolicy(sealing('kms:GenerateDataKey'));
  if (access.kms === 'decrypt' || access.kms === 'encrypt-decrypt') fn.addToRolePolicy(sealing('kms:Decrypt'));
  if (access.kms) fn.addEnvironment('KMS_KEY_ID', keys.sealingKey.keyArn);
  if (access.transcribe) grantTranscribe(fn, media);
  if (access.uploadSigner) {
    if (!signer) throw new Error(`${fn.node.path}: access.uploadSigner needs the stack's upload-signing role (pass \`signer\`)`);
    const role = signer.admit(fn);
    fn.addToRolePolicy(new iam.PolicyStatement({ sid: 'AssumeUploadSigner', actions: ['sts:AssumeRole'], resources: [role.roleArn] }));
    fn.addEnvironment('UPLOAD_SIGNER_ROLE_ARN', role.roleArn);
  }
  fn.addEnvironment('PAYMENTS_PROVIDER', keys.paymentsProvider);
}

/**
 * The upload-signing role (manifest `access.uploadSigner`, shared/manifest/access.ts): the
 * functions that hand out pre-signed upload URLs assume it for each plan (one hour) and sign with
 * its credentials, because a pre-signed URL lives only as long as the credentials that signed it
 * and a Lambda's own role credentials may expire before the hour the URL promises.
 *
 * The role may do one thing: `s3:PutObject` under `uploads/` of the media bucket (S3-managed
 * encryption, so no key grant). Its trust policy admits only the execution roles of the functions
 * `admit`ted, by ARN. The role is created with the first of them (in the same stack, so the trust
 * references their roles and their policies reference it without a cycle); a stack without such a
 * function has no role. Sessions last at most an hour (role chaining caps them there anyway).
 */
export class UploadSigner {
  private role?: iam.Role;

  constructor(
    private readonly scope: Construct,
    private readonly id: string,
    private readonly bucket: s3.IBucket,
  ) {}

  /** The role, with `fn`'s execution role added to those its trust policy admits. */
  admit(fn: lambda.Function): iam.IRole {
    const principal = new iam.ArnPrincipal(fn.role!.roleArn);
    if (this.role) {
      this.role.assumeRolePolicy!.addStatements(new iam.PolicyStatement({ actions: ['sts:AssumeRole'], principals: [principal] }));
      return this.role;
    }
    const role = new iam.Role(this.scope, this.id, {
      description: 'Signs pre-signed upload URLs: s3:PutObject under uploads/ of the media bucket only',
      assumedBy: principal,
      maxSessionDuration: Duration.hours(1),
      inlinePolicies: {
        PutUploads: new iam.PolicyDocument({
          statements: [
            new iam.PolicyStatement({
              sid: 'PutUploads',
              actions: ['s3:PutObject'],
              resources: [this.bucket.arnForObjects(`${BUCKET_PREFIXES.uploads}*`)],
            }),
          ],
        }),
      },
    });
    acknowledge(role, `AwsSolutions-IAM5[Resource::${nagReference(role, this.bucket)}/${BUCKET_PREFIXES.uploads}*]`, 'Upload object keys are per submission, not known in advance.');
    this.role = role;
    return role;
  }
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
