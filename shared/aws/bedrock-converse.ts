/**
 * Bedrock's Converse call (restJson1: `POST /model/{modelId}/converse`) without the Bedrock runtime
 * SDK client, through shared/aws/signed-call.ts (the SDK's signer, HTTP handler, retry strategy and
 * credential chain).
 *
 * Why: the runtime client (its schemas for every operation, the event-stream codecs of the
 * streaming ones, its HTTP/2 handler) was the largest single part of the scoring and annotation
 * consumers' cold start after the media decoders (docs/benchmarks.md), and every consumer that
 * scores, annotates or derives from a transcript uses this one operation.
 *
 * The wire format is the SDK's: the input's members but `modelId` as the JSON body, blobs (image,
 * video and document bytes) as base64, the model id as an escaped path label; the reply parsed as
 * the SDK parses it, with `$metadata`; a failure named by `x-amzn-errortype` (ThrottlingException,
 * ValidationException, ModelTimeoutException, …) and retried when the SDK retries it. Held by
 * test/unit/aws-json-clients.test.ts against the SDK client on the same inputs.
 */
import type { ConverseCommandInput, ConverseCommandOutput } from '@aws-sdk/client-bedrock-runtime';
import type { AwsCredentialIdentityProvider } from '@smithy/types';
import { partition } from '@aws-sdk/core/client';
import { extendedEncodeURIComponent } from '@smithy/core/protocols';
import { blobsAsBase64 } from './json-rpc';
import { jsonPost, readRestJsonError, SignedClient } from './signed-call';

export interface ConverseClientOptions {
  region?: string;
  /** Another endpoint (tests; a VPC endpoint's DNS name); by default the region's public one. */
  endpoint?: string;
  credentials?: AwsCredentialIdentityProvider;
}

export class BedrockConverse {
  private readonly calls: SignedClient;
  /** The endpoint the calls go to (the region's public one unless another was given). */
  readonly origin: URL;
  private readonly region: string;

  constructor(opts: ConverseClientOptions = {}) {
    this.region = opts.region ?? process.env.AWS_REGION ?? process.env.AWS_DEFAULT_REGION ?? 'us-east-1';
    this.origin = new URL(opts.endpoint ?? `https://bedrock-runtime.${this.region}.${partition(this.region).dnsSuffix}`);
    this.calls = new SignedClient({
      service: 'bedrock',
      region: this.region,
      credentials: opts.credentials,
      // ThrottlingException and ModelNotReadyException (429) are retried as throttling, 500/503 as
      // transient, by the SDK's classification; ModelTimeoutException (408) and the 4xx are not.
      readError: readRestJsonError,
    });
  }

  /** One Converse call; `abortSignal` bounds it (the caller's time-out), retries included. */
  async converse(input: ConverseCommandInput, options: { abortSignal?: AbortSignal } = {}): Promise<ConverseCommandOutput> {
    const { modelId, ...members } = input;
    if (!modelId) throw new Error('Converse needs a modelId');
    const body = JSON.stringify(members, blobsAsBase64);
    const path = `${this.origin.pathname.replace(/\/$/, '')}/model/${extendedEncodeURIComponent(modelId)}/converse`;
    const answer = await this.calls.send({
      clientName: 'BedrockRuntimeClient',
      commandName: 'ConverseCommand',
      input: { modelId },
      abortSignal: options.abortSignal,
      request: (traceHeaders) => jsonPost(this.origin, path, 'application/json', body, traceHeaders),
    });
    const doc = JSON.parse(Buffer.from(answer.body).toString('utf8') || '{}') as Omit<ConverseCommandOutput, '$metadata'>;
    return { ...doc, $metadata: answer.$metadata };
  }

  destroy(): void {
    this.calls.destroy();
  }
}

let shared: BedrockConverse | undefined;
/**
 * The function's one Converse client: its connections (keep-alive), credentials and retry budget
 * outlive a message, as an SDK client created once per container would.
 */
export function converseClient(): BedrockConverse {
  return (shared ??= new BedrockConverse());
}
