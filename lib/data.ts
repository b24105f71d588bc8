import { Duration, RemovalPolicy, aws_dynamodb as dynamodb, aws_s3 as s3 } from 'aws-cdk-lib';
import { Construct } from 'constructs';
import { TABLE_DEF } from '../shared/db/table';
import { BUCKET_PREFIXES } from '../shared/manifest/wiring';
import { EXPORT_RETENTION_DAYS } from '../shared/exports/model';
import { REJECTED_RETENTION_DAYS, TRANSCRIPT_RETENTION_DAYS } from '../shared/storage/lifecycle';

/**
 * S3 lifecycle (days after the object was written):
 * - rejected uploads: the pipeline tags their bytes `REJECTED_OBJECT_TAG`; deleted after
 *   `REJECTED_RETENTION_DAYS` (30) from the upload, so they outlive the buyer's 7-day override
 *   window counted from the verdict, even a verdict days late (shared/storage/lifecycle.ts);
 * - exports (`exports/`): `EXPORT_RETENTION_DAYS` (30); every read of an export signs a fresh
 *   7-day link that never lasts past this (shared/exports/model.ts);
 * - Transcribe's output documents (`transcripts/`): `TRANSCRIPT_RETENTION_DAYS` (30), read once;
 * - incomplete multipart uploads: aborted after 1 day;
 * - approved files and keyframes: kept.
 */
export const REJECTED_OBJECT_TAG = { key: 'verdict', value: 'rejected' } as const;
export const REJECTED_EXPIRY_DAYS = REJECTED_RETENTION_DAYS;
export const EXPORTS_PREFIX: string = (BUCKET_PREFIXES as Record<string, string>).exports ?? 'exports/';

/**
 * The stateful part: the single table (shape from `shared/db/table.ts`, the same definition the
 * local runtime gives DynamoDB Local) and the media bucket. Both are retained when the stack is
 * deleted: they hold the ledger and the buyers' files.
 */
export class Data extends Construct {
  readonly table: dynamodb.Table;
  readonly bucket: s3.Bucket;
  /** S3 server access logs of the media bucket (who read or wrote which object, from where). */
  readonly accessLogBucket: s3.Bucket;

  constructor(scope: Construct, id: string) {
    super(scope, id);

    const str = (name: string): dynamodb.Attribute => ({ name, type: dynamodb.AttributeType.STRING });
    this.table = new dynamodb.Table(this, 'Table', {
      partitionKey: str(TABLE_DEF.partitionKey),
      sortKey: str(TABLE_DEF.sortKey),
      billingMode: dynamodb.BillingMode.PAY_PER_REQUEST,
      // D11: TTL only cleans up; expiry is always checked in code.
      timeToLiveAttribute: TABLE_DEF.ttlAttribute,
      // D35: the outbox and the sandbox pipe read the stream.
      stream: dynamodb.StreamViewType[TABLE_DEF.stream],
      pointInTimeRecoverySpecification: { pointInTimeRecoveryEnabled: true },
      deletionProtection: true,
      removalPolicy: RemovalPolicy.RETAIN,
    });
    for (const g of TABLE_DEF.gsis) {
      this.table.addGlobalSecondaryIndex({
        indexName: g.name,
        partitionKey: str(g.partitionKey),
        sortKey: str(g.sortKey),
        projectionType: dynamodb.ProjectionType.ALL,
      });
    }

    // S3 server access logs, not CloudTrail data events: every request, at no charge beyond the
    // storage of the log objects (data events cost $0.10 per 100,000 events). Kept 90 days.
    this.accessLogBucket = new s3.Bucket(this, 'AccessLogBucket', {
      blockPublicAccess: s3.BlockPublicAccess.BLOCK_ALL,
      objectOwnership: s3.ObjectOwnership.BUCKET_OWNER_ENFORCED,
      encryption: s3.BucketEncryption.S3_MANAGED,
      enforceSSL: true,
      lifecycleRules: [{ id: 'expire-logs', expiration: Duration.days(90) }],
      removalPolicy: RemovalPolicy.RETAIN,
    });

    this.bucket = new s3.Bucket(this, 'MediaBucket', {
      serverAccessLogsBucket: this.accessLogBucket,
      serverAccessLogsPrefix: 'media/',
      blockPublicAccess: s3.BlockPublicAccess.BLOCK_ALL,
      objectOwnership: s3.ObjectOwnership.BUCKET_OWNER_ENFORCED,
      encryption: s3.BucketEncryption.S3_MANAGED,
      enforceSSL: true,
      versioned: false,
      // Workers upload with pre-signed PUTs straight from apps and browsers; GET/HEAD stay allowed
      // cross-origin for the S3 pre-signed reads the pipeline hands to itself.
      cors: [
        {
          allowedMethods: [s3.HttpMethods.PUT, s3.HttpMethods.GET, s3.HttpMethods.HEAD],
          allowedOrigins: ['*'],
          allowedHeaders: ['*'],
          exposedHeaders: ['ETag'],
          maxAge: 3000,
        },
      ],
      lifecycleRules: [
        { id: 'abort-incomplete-multipart', abortIncompleteMultipartUploadAfter: Duration.days(1) },
        { id: 'expire-rejected-uploads', tagFilters: { [REJECTED_OBJECT_TAG.key]: REJECTED_OBJECT_TAG.value }, expiration: Duration.days(REJECTED_EXPIRY_DAYS) },
        { id: 'expire-exports', prefix: EXPORTS_PREFIX, expiration: Duration.days(EXPORT_RETENTION_DAYS) },
        { id: 'expire-transcripts', prefix: BUCKET_PREFIXES.transcripts, expiration: Duration.days(TRANSCRIPT_RETENTION_DAYS) },
      ],
      removalPolicy: RemovalPolicy.RETAIN,
    });

    // S3 → EventBridge notifications. Set on the CloudFormation resource itself rather than with
    // the L2 `eventBridgeEnabled: true`: the L2 prop configures notifications through the
    // `Custom::S3BucketNotifications` resource, whose singleton handler is an extra (Python) Lambda.
    // CloudFormation supports the setting natively, so no custom resource is needed.
    const cfnBucket = this.bucket.node.defaultChild as s3.CfnBucket;
    cfnBucket.notificationConfiguration = { eventBridgeConfiguration: { eventBridgeEnabled: true } };
  }
}
