/**
 * STS AssumeRole over its query protocol (form-encoded POST, XML answer), without the STS SDK
 * client, on the same signed-call core as the other small clients (shared/aws/signed-call.ts: the
 * SDK's signer, HTTP handler, retries and credential chain; checked and traced as an SDK call).
 *
 * Used for one thing: the credentials that sign pre-signed upload URLs (shared/storage/
 * upload-signer.ts). A pre-signed URL lives only as long as the credentials that signed it, so
 * they are assumed fresh for each plan, with a known expiry.
 *
 * Held by a test: the request is the STS SDK client's for the same input, and the answer and the
 * errors are read as that client reads them (test/unit/sts.test.ts).
 */
import type { AwsCredentialIdentity, AwsCredentialIdentityProvider } from '@smithy/types';
import { partition } from '@aws-sdk/core/client';
import { AwsServiceError, HttpRequest, SignedClient, USER_AGENT } from './signed-call';
import { xmlField } from './xml';

export interface AssumedCredentials extends AwsCredentialIdentity {
  sessionToken: string;
  expiration: Date;
}


/** The query protocol's error document: `<ErrorResponse><Error><Code>…</Code><Message>…`. */
function readStsError(status: number, _headers: Record<string, string>, body: Uint8Array) {
  const xml = Buffer.from(body).toString('utf8');
  return { code: xmlField(xml, 'Code') ?? `Http${status}`, message: xmlField(xml, 'Message') ?? `answered ${status}` };
}

/** As the SDK encodes a query-protocol form value (RFC 3986, spaces as %20). */
const formValue = (v: string) => encodeURIComponent(v).replace(/[!'()*]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`);

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
  private readonly calls: SignedClient;
  private readonly origin: URL;

  constructor(private readonly opts: StsClientOptions) {
    this.calls = new SignedClient({ service: 'sts', region: opts.region, credentials: opts.credentials, socketTimeoutMs: 10_000, readError: readStsError });
    this.origin = new URL(opts.endpoint ?? `https://sts.${opts.region}.${partition(opts.region).dnsSuffix}`);
  }

  /** AssumeRole: temporary credentials of `roleArn` for `durationSeconds` (900..3600 for a role assumed by a role). */
  async assumeRole(roleArn: string, sessionName: string, durationSeconds: number): Promise<AssumedCredentials> {
    const form = `Action=AssumeRole&Version=2011-06-15&RoleArn=${formValue(roleArn)}&RoleSessionName=${formValue(sessionName)}&DurationSeconds=${durationSeconds}`;
    const answer = await this.calls.send({
      abortSignal: AbortSignal.timeout(this.opts.budgetMs ?? ASSUME_ROLE_BUDGET_MS),
      clientName: 'STSClient',
      commandName: 'AssumeRoleCommand',
      input: { RoleArn: roleArn, RoleSessionName: sessionName, DurationSeconds: durationSeconds },
      request: (traceHeaders) => {
        const port = this.origin.port ? Number(this.origin.port) : undefined;
        return new HttpRequest({
          protocol: this.origin.protocol,
          hostname: this.origin.hostname,
          port,
          method: 'POST',
          path: this.origin.pathname || '/',
          headers: {
            host: `${this.origin.hostname}${port !== undefined ? `:${port}` : ''}`,
            'content-type': 'application/x-www-form-urlencoded',
            'content-length': String(Buffer.byteLength(form)),
            'user-agent': USER_AGENT,
            ...traceHeaders,
          },
          body: form,
        });
      },
    });
    const xml = Buffer.from(answer.body).toString('utf8');
    const creds = /<Credentials>([\s\S]*?)<\/Credentials>/.exec(xml)?.[1] ?? '';
    const accessKeyId = xmlField(creds, 'AccessKeyId');
    const secretAccessKey = xmlField(creds, 'SecretAccessKey');
    const sessionToken = xmlField(creds, 'SessionToken');
    const expiration = new Date(xmlField(creds, 'Expiration') ?? '');
    if (!accessKeyId || !secretAccessKey || !sessionToken || Number.isNaN(expiration.getTime())) {
      throw new AwsServiceError('InvalidResponse', 'AssumeRole answered without complete credentials', answer.$metadata);
    }
    return { accessKeyId, secretAccessKey, sessionToken, expiration };
  }

  destroy(): void {
    this.calls.destroy();
  }
}
