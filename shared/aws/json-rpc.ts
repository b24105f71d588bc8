/**
 * A call in the AWS JSON RPC protocols (awsJson1_0 / awsJson1_1: `POST /`, the operation in
 * `X-Amz-Target`, the input as a JSON body with blobs in base64) without a service SDK client,
 * through shared/aws/signed-call.ts (the SDK's signer, HTTP handler, retry strategy and credential
 * chain; checked and traced as an SDK call). A failure is named by the error's `__type`, as the SDK
 * names it, and retried when the SDK retries it.
 *
 * Used where a function makes one or two calls of a service whose SDK client would be parsed at
 * every cold start: Transcribe's StartTranscriptionJob (shared/aws/transcribe-jobs.ts), KMS's
 * GenerateDataKey and Decrypt (shared/secrets/kms.ts) and SQS's SendMessage, ChangeMessageVisibility
 * and GetQueueUrl (shared/queues.ts). Held by test/unit/aws-json-clients.test.ts
 * and test/unit/sealer.test.ts against the SDK clients and a KMS speaking the published protocol.
 */
import type { AwsCredentialIdentityProvider } from '@smithy/types';
import { partition } from '@aws-sdk/core/client';
import { jsonPost, readJsonRpcError, SignedClient, type CallMetadata } from './signed-call';

export interface JsonRpcOptions {
  /** The signing name and endpoint prefix (`kms`, `transcribe`). */
  service: string;
  /** The `X-Amz-Target` prefix (`TrentService`, `Transcribe`). */
  targetPrefix: string;
  /** Protocol version: the content type is `application/x-amz-json-<version>`. */
  version: '1.0' | '1.1';
  /** As the SDK names the client, for the grant check and the trace (`KMSClient`). */
  clientName: string;
  region?: string;
  endpoint?: string;
  credentials?: AwsCredentialIdentityProvider;
  /** The host where the service's own rules differ from `<service>.<region>.<dnsSuffix>`. */
  hostFor?: (region: string) => string | undefined;
  /** Headers the SDK client adds to every request of the service (SQS: `x-amzn-query-mode`). */
  headers?: Record<string, string>;
}

/** A Uint8Array anywhere in the input becomes base64, as the SDK serialises a blob member. */
export function blobsAsBase64(this: unknown, key: string, value: unknown): unknown {
  const original = (this as Record<string, unknown>)[key];
  return original instanceof Uint8Array ? Buffer.from(original.buffer, original.byteOffset, original.byteLength).toString('base64') : value;
}

export class JsonRpcClient {
  private readonly calls: SignedClient;
  /** The endpoint the calls go to (the region's public one unless another was given). */
  readonly origin: URL;

  constructor(private readonly opts: JsonRpcOptions) {
    const region = opts.region ?? process.env.AWS_REGION ?? process.env.AWS_DEFAULT_REGION ?? 'us-east-1';
    const host = opts.hostFor?.(region) ?? `${opts.service}.${region}.${partition(region).dnsSuffix}`;
    this.origin = new URL(opts.endpoint ?? `https://${host}`);
    this.calls = new SignedClient({ service: opts.service, region, credentials: opts.credentials, socketTimeoutMs: 30_000, readError: readJsonRpcError });
  }

  /** One operation; answers the reply's JSON (blobs still base64) with the call's `$metadata`. */
  async call<O>(operation: string, input: object): Promise<O & { $metadata: CallMetadata }> {
    const answer = await this.calls.send({
      clientName: this.opts.clientName,
      commandName: `${operation}Command`,
      input: input as Record<string, unknown>,
      // Serialised per attempt, after the call's check: locally the check may add to the input
      // (an SQS send's trace header, local/grants.ts), as an SDK middleware would.
      request: (traceHeaders) =>
        jsonPost(this.origin, this.origin.pathname, `application/x-amz-json-${this.opts.version}`, JSON.stringify(input, blobsAsBase64), {
          'x-amz-target': `${this.opts.targetPrefix}.${operation}`,
          ...this.opts.headers,
          ...traceHeaders,
        }),
    });
    const doc = JSON.parse(Buffer.from(answer.body).toString('utf8') || '{}') as O;
    return { ...doc, $metadata: answer.$metadata };
  }

  destroy(): void {
    this.calls.destroy();
  }
}
