/**
 * The upload-signing role (`UploadSigner`), which the upload and retry routes assume to sign their
 * pre-signed upload URLs. Re-exported by grants.ts.
 */
import { Duration, aws_iam as iam, aws_lambda as lambda, aws_s3 as s3 } from 'aws-cdk-lib';
import type { Construct } from 'constructs';
import { acknowledge } from './nag';
import { nagReference } from './nag-reference';
import { BUCKET_PREFIXES } from '../../shared/manifest/wiring';

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
