/**
 * A call in the AWS query protocol (a form-encoded POST of `Action`, `Version` and the input's
 * members; an XML answer) without a service SDK client, on the signed-call core of the other small
 * clients (shared/aws/signed-call.ts: the SDK's signer, HTTP handler, retries and credential chain;
 * checked and traced as an SDK call). Errors are read from the query protocol's error document
 * (`<ErrorResponse><Error><Code>…</Code><Message>…`) and named by its code, as the SDK names them.
 *
 * Used for STS's AssumeRole (shared/aws/sts.ts) and SNS's Publish of an SMS (shared/sms). Held by
 * test/unit/sts.test.ts and test/unit/sns-publish.test.ts against the SDK clients.
 */
import type { AwsCredentialIdentityProvider } from '@smithy/types';
import { partition } from '@aws-sdk/core/client';
import { HttpRequest, SignedClient, USER_AGENT, type CallMetadata } from './signed-call';
import { xmlField } from './xml';

/** The query protocol's error document. */
function readQueryError(status: number, _headers: Record<string, string>, body: Uint8Array) {
  const xml = Buffer.from(body).toString('utf8');
  return { code: xmlField(xml, 'Code') ?? `Http${status}`, message: xmlField(xml, 'Message') ?? `answered ${status}` };
}

/** As the SDK encodes a query-protocol form value (RFC 3986, spaces as %20). */
export const formValue = (v: string) => encodeURIComponent(v).replace(/[!'()*]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`);

export interface QueryClientOptions {
  /** The signing name and endpoint prefix (`sts`, `sns`). */
  service: string;
  /** The API version every request names (`2011-06-15`). */
  version: string;
  /** As the SDK names the client, for the grant check and the trace (`STSClient`). */
  clientName: string;
  region: string;
  /** The local emulator; deployed, the region's endpoint (`<service>.<region>.<dnsSuffix>`). */
  endpoint?: string;
  credentials?: AwsCredentialIdentityProvider;
  socketTimeoutMs?: number;
}

export class QueryClient {
  private readonly calls: SignedClient;
  /** The endpoint the calls go to. */
  readonly origin: URL;

  constructor(private readonly opts: QueryClientOptions) {
    this.calls = new SignedClient({ service: opts.service, region: opts.region, credentials: opts.credentials, socketTimeoutMs: opts.socketTimeoutMs ?? 10_000, readError: readQueryError });
    this.origin = new URL(opts.endpoint ?? `https://${opts.service}.${opts.region}.${partition(opts.region).dnsSuffix}`);
  }

  /** One action with its (flat) input; answers the XML answer with the call's `$metadata`. */
  async call(action: string, input: Record<string, string | number>, abortSignal?: AbortSignal): Promise<{ xml: string; $metadata: CallMetadata }> {
    const form = [`Action=${action}`, `Version=${this.opts.version}`, ...Object.entries(input).map(([k, v]) => `${k}=${formValue(String(v))}`)].join('&');
    const answer = await this.calls.send({
      abortSignal,
      clientName: this.opts.clientName,
      commandName: `${action}Command`,
      input,
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
    return { xml: Buffer.from(answer.body).toString('utf8'), $metadata: answer.$metadata };
  }

  destroy(): void {
    this.calls.destroy();
  }
}
