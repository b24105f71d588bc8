/**
 * STS AssumeRole over its query protocol (form-encoded POST, XML answer; shared/aws/query-protocol.ts),
 * without the STS SDK client, on the same signed-call core as the other small clients.
 *
 * Used for one thing: the credentials that sign pre-signed upload URLs (shared/storage/
 * upload-signer.ts). A pre-signed URL lives only as long as the credentials that signed it, so
 * they are assumed fresh for each plan, with a known expiry.
 *
 * Held by a test: the request is the STS SDK client's for the same input, and the answer and the
 * errors are read as that client reads them (test/unit/sts.test.ts).
 */
import type { AwsCredentialIdentity, AwsCredentialIdentityProvider } from '@smithy/types';
import { QueryClient } from './query-protocol';
import { AwsServiceError } from './signed-call';
import { xmlField } from './xml';

export interface AssumedCredentials extends AwsCredentialIdentity {
  sessionToken: string;
  expiration: Date;
}

/** An AssumeRole call, its retries included, gives up after this (well inside a route's 28 s). */
export const ASSUME_ROLE_BUDGET_MS = 8_000;

export interface StsClientOptions {
  region: string;
  /** The local emulator; deployed, the region's endpoint (`sts.<region>.amazonaws.com`). */
  endpoint?: string;
  credentials?: AwsCredentialIdentityProvider;
  /** How long one AssumeRole call, its retries included, may take (ASSUME_ROLE_BUDGET_MS). */
  budgetMs?: number;
}

export class StsClient {
  private readonly query: QueryClient;

  constructor(private readonly opts: StsClientOptions) {
    this.query = new QueryClient({ service: 'sts', version: '2011-06-15', clientName: 'STSClient', region: opts.region, endpoint: opts.endpoint, credentials: opts.credentials });
  }

  /** AssumeRole: temporary credentials of `roleArn` for `durationSeconds` (900..3600 for a role assumed by a role). */
  async assumeRole(roleArn: string, sessionName: string, durationSeconds: number): Promise<AssumedCredentials> {
    const { xml: answer, $metadata } = await this.query.call(
      'AssumeRole',
      { RoleArn: roleArn, RoleSessionName: sessionName, DurationSeconds: durationSeconds },
      AbortSignal.timeout(this.opts.budgetMs ?? ASSUME_ROLE_BUDGET_MS),
    );
    const creds = /<Credentials>([\s\S]*?)<\/Credentials>/.exec(answer)?.[1] ?? '';
    const accessKeyId = xmlField(creds, 'AccessKeyId');
    const secretAccessKey = xmlField(creds, 'SecretAccessKey');
    const sessionToken = xmlField(creds, 'SessionToken');
    const expiration = new Date(xmlField(creds, 'Expiration') ?? '');
    if (!accessKeyId || !secretAccessKey || !sessionToken || Number.isNaN(expiration.getTime())) {
      throw new AwsServiceError('InvalidResponse', 'AssumeRole answered without complete credentials', $metadata);
    }
    return { accessKeyId, secretAccessKey, sessionToken, expiration };
  }

  destroy(): void {
    this.query.destroy();
  }
}
