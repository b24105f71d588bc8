/**
 * Runtime configuration from the environment, read once. The stack sets these on every Lambda; the
 * local runtime sets them for its process. Local-only settings (D44) are honoured only when
 * RUNTIME=local, and the stack never sets RUNTIME=local. No secret is configured here (D63):
 * secrets are read at run time through shared/secrets.
 */
export interface Config {
  runtime: 'aws' | 'local';
  region: string;
  tableName: string;
  bucketName: string;
  /** Endpoints of the local emulators; unset in AWS. */
  dynamoEndpoint?: string;
  /**
   * Local runtime on a persistent DynamoDB Local: follow every transaction with a plain write, the
   * only thing that makes DynamoDB Local persist a committed transaction at once (shared/db/client).
   */
  localDurableTransactions?: boolean;
  s3Endpoint?: string;
  sqsEndpoint?: string;
  /** The role whose credentials sign pre-signed upload URLs (manifest `access.uploadSigner`). */
  uploadSignerRoleArn?: string;
  /** STS endpoint (the local runtime's emulator); deployed, the region's `sts.<region>.amazonaws.com`. */
  stsEndpoint?: string;
  /** Queue URLs by logical queue name (wiring). */
  queueUrls: Record<string, string>;
  /** Public base URL of the API, used to build links (checkout, purchase_url). */
  publicBaseUrl: string;
  /** D20: longest long-poll wait this deployment can hold. */
  longPollMaxSeconds: number;
  /** Held long polls at once per long-poll route, all organizations (shared/long-poll-slots.ts). */
  longPollMaxWaits: number;
  /** Held long polls at once per long-poll route and organization. */
  longPollMaxWaitsPerOrg: number;
  localFixedOtp?: string;
  sandboxDelaySeconds: number;
}

let cached: Config | null = null;

export function config(): Config {
  if (cached) return cached;
  const e = process.env;
  const runtime = e.RUNTIME === 'local' ? 'local' : 'aws';
  const queueUrls: Record<string, string> = {};
  for (const [k, v] of Object.entries(e)) {
    const m = /^QUEUE_URL_(.+)$/.exec(k);
    if (m && v) queueUrls[m[1]!.toLowerCase().replace(/_/g, '-')] = v;
  }
  cached = {
    runtime,
    region: e.AWS_REGION ?? 'us-east-1',
    tableName: e.TABLE_NAME ?? 'marketplace',
    bucketName: e.BUCKET_NAME ?? 'marketplace-media',
    dynamoEndpoint: e.DYNAMODB_ENDPOINT || undefined,
    localDurableTransactions: e.LOCAL_DYNAMODB_DURABLE_TRANSACTIONS === '1',
    s3Endpoint: e.S3_ENDPOINT || undefined,
    sqsEndpoint: e.SQS_ENDPOINT || undefined,
    uploadSignerRoleArn: e.UPLOAD_SIGNER_ROLE_ARN || undefined,
    stsEndpoint: e.STS_ENDPOINT || undefined,
    queueUrls,
    publicBaseUrl: (e.PUBLIC_BASE_URL ?? 'http://127.0.0.1:3000').replace(/\/$/, ''),
    longPollMaxSeconds: Math.min(60, Number(e.LONG_POLL_MAX_SECONDS ?? 60)),
    longPollMaxWaits: Math.max(1, Number(e.LONG_POLL_MAX_WAITS ?? 20)),
    longPollMaxWaitsPerOrg: Math.max(1, Number(e.LONG_POLL_MAX_WAITS_PER_ORG ?? 5)),
    localFixedOtp: runtime === 'local' ? e.LOCAL_FIXED_OTP || undefined : undefined,
    sandboxDelaySeconds: Number(e.SANDBOX_DELAY_SECONDS ?? 15),
  };
  return cached;
}

/** Tests and the local runtime change the environment, then call this. */
export function resetConfig(): void {
  cached = null;
}
