import { Duration, RemovalPolicy, aws_dynamodb as dynamodb, aws_s3 as s3 } from 'aws-cdk-lib';
import { Construct } from 'constructs';
import { TABLE_DEF } from '../shared/db/table';

/**
 * The stateful part: the single table (shape from `shared/db/table.ts`, the same definition the
 * local runtime gives DynamoDB Local) and the media bucket. Both are retained when the stack is
 * deleted: they hold the ledger and the buyers' files.
 */
export class Data extends Construct {
  readonly table: dynamodb.Table;
  readonly bucket: s3.Bucket;

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

    this.bucket = new s3.Bucket(this, 'MediaBucket', {
      blockPublicAccess: s3.BlockPublicAccess.BLOCK_ALL,
      objectOwnership: s3.ObjectOwnership.BUCKET_OWNER_ENFORCED,
      encryption: s3.BucketEncryption.S3_MANAGED,
      enforceSSL: true,
      versioned: false,
      // Workers upload with pre-signed PUTs straight from apps and browsers; downloads are
      // pre-signed GETs (D30), so GET/HEAD are allowed cross-origin as well.
      cors: [
        {
          allowedMethods: [s3.HttpMethods.PUT, s3.HttpMethods.GET, s3.HttpMethods.HEAD],
          allowedOrigins: ['*'],
          allowedHeaders: ['*'],
          exposedHeaders: ['ETag'],
          maxAge: 3000,
        },
      ],
      lifecycleRules: [{ id: 'abort-incomplete-multipart', abortIncompleteMultipartUploadAfter: Duration.days(1) }],
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
