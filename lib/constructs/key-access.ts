/**
 * A function's keys (D63): the secrets, the sealing key, the CDN signing key and the upload-signing
 * role its manifest entry's `access` declares, and the Parameters and Secrets extension that reads
 * the secrets. Re-exported by grants.ts.
 */
import { Duration, aws_cloudfront as cloudfront, aws_iam as iam, aws_kms as kms, aws_lambda as lambda, aws_s3 as s3, aws_secretsmanager as secretsmanager } from 'aws-cdk-lib';
import { kmsAllows, secretArnVariable, secretsRead, type KeyAccess, type SecretName } from '../../shared/manifest/access';
import { EXTENSION_TTL_SECONDS } from '../../shared/secrets';
import { encryptionContext, LEGACY_ENCRYPTION_CONTEXT, SEALING_PURPOSES, type EncryptionContext } from '../../shared/secrets/kms';
import { grantTranscribe } from './service-grants';
import type { UploadSigner } from './upload-signer';

/** What `bindKeyAccess` needs from the stack: the secrets and the sealing key, and the CDN. */
export interface KeyResources {
  secret(name: SecretName): secretsmanager.ISecret | undefined;
  readonly sealingKey: kms.IKey;
  readonly paymentsProvider: 'stripe' | 'disabled';
  /** Decrypt under the context all purposes shared before, for the functions that open values (KeysProps.legacySealedValues). */
  readonly legacySealedValues: boolean;
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
 * - `kms`: per sealing purpose, encrypt (kms:GenerateDataKey), decrypt (kms:Decrypt), or both, on
 *   the sealing key and only with that purpose's encryption context; a function that opens values
 *   also opens those sealed under the one context all purposes shared before (decrypt only: no
 *   role makes new ones) while the deploy still has such values (`legacySealedValues`); `KMS_KEY_ID`.
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
  const sealing = (action: string, context: EncryptionContext) =>
    new iam.PolicyStatement({
      actions: [action],
      resources: [keys.sealingKey.keyArn],
      conditions: { StringEquals: Object.fromEntries(Object.entries(context).map(([k, v]) => [`kms:EncryptionContext:${k}`, v])) },
    });
  for (const purpose of SEALING_PURPOSES) {
    if (kmsAllows(access.kms, purpose, 'encrypt')) fn.addToRolePolicy(sealing('kms:GenerateDataKey', encryptionContext(purpose)));
    if (kmsAllows(access.kms, purpose, 'decrypt')) fn.addToRolePolicy(sealing('kms:Decrypt', encryptionContext(purpose)));
  }
  // Values sealed before each purpose had its own context (shared/secrets/sealer.ts, `s2`): stored
  // responses expire within 24 h, endpoint secrets are re-sealed once (scripts/reseal-endpoint-secrets.ts);
  // after both, a deploy with legacySealedValues=false takes the grant away.
  if (keys.legacySealedValues && SEALING_PURPOSES.some((p) => kmsAllows(access.kms, p, 'decrypt'))) fn.addToRolePolicy(sealing('kms:Decrypt', LEGACY_ENCRYPTION_CONTEXT));
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
