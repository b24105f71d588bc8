/**
 * One AWS API call over HTTPS without a service SDK client, made of the SDK's own parts: signed by
 * its Signature V4 signer, sent by its HTTP handler, retried by its standard retry strategy with
 * its error classification, with the credential chain the SDK clients use (in bundles,
 * shared/aws/lambda-credentials.ts). Each call passes `tracedCall` (the local runtime's grant and
 * time-out checks, the X-Ray subsegment deployed) as an SDK call does.
 *
 * Why: a service client (its schemas, endpoint rules, protocol code and middlewares) is parsed at
 * every cold start of every function that bundles it, imported lazily or not (docs/benchmarks.md).
 * The small clients built on this (shared/storage/object-client.ts for the bucket,
 * shared/aws/bedrock-converse.ts for the model, shared/aws/json-rpc.ts for Amazon Transcribe
 * and KMS) each make the few operations our functions use.
 */
import type { AwsCredentialIdentityProvider } from '@smithy/types';
import { recursionDetectionMiddleware } from '@aws-sdk/core/client';
import { defaultProvider } from '@aws-sdk/credential-provider-node';
import { Sha256 } from '@smithy/core/checksum';
import { HttpRequest, loadJsonRpcErrorCode, loadRestJsonErrorCode } from '@smithy/core/protocols';
import { DEFAULT_MAX_ATTEMPTS, isServerError, isThrottlingError, isTransientError, StandardRetryStrategy } from '@smithy/core/retry';
import { NodeHttpHandler, streamCollector } from '@smithy/node-http-handler';
import { SignatureV4 } from '@smithy/signature-v4';
import { ensureRunning } from '../observability/invocation';
import { tracedCall } from '../observability/tracer';

export interface CallMetadata {
  httpStatusCode?: number;
  requestId?: string;
  extendedRequestId?: string;
  attempts?: number;
}

/** An error the service answered, shaped like the SDK's (a network failure is rethrown as it came, with `$metadata`). */
export class AwsServiceError extends Error {
  readonly $fault: 'client' | 'server';
  constructor(name: string, message: string, readonly $metadata: CallMetadata) {
    super(message);
    this.name = name;
    this.$fault = ($metadata.httpStatusCode ?? 500) >= 500 ? 'server' : 'client';
  }
}

export interface SignedAnswer {
  status: number;
  headers: Record<string, string>;
  body: Uint8Array;
  $metadata: CallMetadata & { httpStatusCode: number; attempts: number };
}

export interface SignedCall {
  /** As the SDK names them for the grant check and the trace: `S3Client`, `PutObjectCommand`. */
  clientName: string;
  commandName: string;
  /** The call's input as the SDK command would carry it (the local grant check reads it). */
  input: Record<string, unknown>;
  /** Built for each attempt, with the headers the trace adds. */
  request: (headers: Record<string, string>) => HttpRequest;
  abortSignal?: AbortSignal;
}

export interface SignedClientOptions {
  service: string;
  region: string;
  credentials?: AwsCredentialIdentityProvider;
  /** S3 signs the path as sent; every other service escapes it again (the signer's default). */
  uriEscapePath?: boolean;
  applyChecksum?: boolean;
  /**
   * Socket idle time-out: a socket silent this long fails the attempt with a TimeoutError, which
   * is retried as transient. None by default (a model may think for a minute before its first
   * byte: its caller's abort signal bounds that call).
   */
  socketTimeoutMs?: number;
  /** The service's error code and message from a non-2xx answer. */
  readError: (status: number, headers: Record<string, string>, body: Uint8Array) => { code: string; message: string };
}

const recursionDetection = recursionDetectionMiddleware();

/** Waits `ms`, or less when `signal` aborts meanwhile. */
function backoff(ms: number, signal: AbortSignal | undefined): Promise<void> {
  if (ms <= 0 || signal?.aborted) return Promise.resolve();
  return new Promise((resolve) => {
    const done = () => {
      clearTimeout(timer);
      signal?.removeEventListener('abort', done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    signal?.addEventListener('abort', done, { once: true });
  });
}

/** As the SDK's retry middleware classifies an error. */
function errorType(err: Error): 'THROTTLING' | 'TRANSIENT' | 'SERVER_ERROR' | 'CLIENT_ERROR' {
  if (isThrottlingError(err as never)) return 'THROTTLING';
  if (isTransientError(err as never)) return 'TRANSIENT';
  if (isServerError(err as never)) return 'SERVER_ERROR';
  return 'CLIENT_ERROR';
}

export const USER_AGENT = 'media-marketplace-signed-call/1';

export class SignedClient {
  readonly signer: SignatureV4;
  // Unlike the SDK's defaults, a connection that does not open fails (and is retried) instead of
  // holding the invocation until its time-out.
  private readonly http: NodeHttpHandler;
  /** The SDK clients' default: 3 attempts. */
  private readonly retries = new StandardRetryStrategy(DEFAULT_MAX_ATTEMPTS);

  constructor(private readonly opts: SignedClientOptions) {
    this.signer = new SignatureV4({
      credentials: opts.credentials ?? defaultProvider(),
      region: opts.region,
      service: opts.service,
      sha256: Sha256,
      uriEscapePath: opts.uriEscapePath ?? true,
      applyChecksum: opts.applyChecksum ?? true,
    });
    // `socketTimeout` is the idle time-out; the handler's `requestTimeout` would only log a warning.
    this.http = new NodeHttpHandler({ connectionTimeout: 3_000, ...(opts.socketTimeoutMs ? { socketTimeout: opts.socketTimeoutMs } : {}) });
  }

  /** One call: checked and traced once, each attempt signed anew and retried as the SDK retries. */
  send(call: SignedCall): Promise<SignedAnswer> {
    return tracedCall({ clientName: call.clientName, commandName: call.commandName, region: this.opts.region }, call.input, async (traceHeaders) => {
      let token = await this.retries.acquireInitialRetryToken(call.commandName);
      let attempts = 0;
      for (;;) {
        attempts++;
        ensureRunning(); // locally, no retry of a stopped invocation goes out
        try {
          const request = call.request(traceHeaders);
          // As every SDK client: in Lambda the invocation's trace id goes along (Lambda's detection
          // of recursive loops reads it), sampled or not; a sampled trace's header stays.
          await recursionDetection(async (args) => ({ output: args, response: undefined }), {})({ input: call.input, request });
          const signed = await this.signer.sign(request);
          const { response } = await this.http.handle(signed as HttpRequest, { abortSignal: call.abortSignal });
          const body = response.body ? await streamCollector(response.body) : new Uint8Array();
          const headers = response.headers;
          const $metadata = {
            httpStatusCode: response.statusCode,
            requestId: headers['x-amz-request-id'] ?? headers['x-amzn-requestid'],
            extendedRequestId: headers['x-amz-id-2'],
            attempts,
          };
          if (response.statusCode >= 300) {
            const { code, message } = this.opts.readError(response.statusCode, headers, body);
            throw new AwsServiceError(code, message, $metadata);
          }
          this.retries.recordSuccess(token);
          return { status: response.statusCode, headers, body, $metadata };
        } catch (e) {
          // As the SDK's retry middleware: every failure leaves with its attempts, network errors too.
          const err = (typeof e === 'object' && e !== null ? e : new Error(String(e))) as Error & { $metadata?: CallMetadata };
          (err.$metadata ??= {}).attempts = attempts;
          if (call.abortSignal?.aborted) throw err;
          try {
            token = await this.retries.refreshRetryTokenForRetry(token, { errorType: errorType(err) });
          } catch {
            throw err;
          }
          // This strategy waits out the backoff itself; a delay left on the token is waited here,
          // unless the caller's signal ends the call first.
          await backoff(token.getRetryDelay(), call.abortSignal);
          if (call.abortSignal?.aborted) throw err;
        }
      }
    });
  }

  destroy(): void {
    this.http.destroy();
  }
}

function jsonBody(body: Uint8Array): Record<string, unknown> {
  try {
    const doc = JSON.parse(Buffer.from(body).toString('utf8') || '{}') as unknown;
    return typeof doc === 'object' && doc !== null ? (doc as Record<string, unknown>) : {};
  } catch {
    return {}; // not JSON (a proxy's page): the SDK names it Unknown too
  }
}

/** The SDK's reading of an error in a JSON protocol: its code by the protocol's precedence, then `message`/`Message`. */
function jsonError(code: string | undefined, doc: Record<string, unknown>): { code: string; message: string } {
  const message = doc.message ?? doc.Message;
  return { code: code ?? 'Unknown', message: typeof message === 'string' ? message : 'UnknownError' };
}

/** awsJson1_0/1_1 (KMS, Transcribe): `__type`, then `code`, then `x-amzn-errortype`, as the SDK reads them. */
export function readJsonRpcError(status: number, headers: Record<string, string>, body: Uint8Array): { code: string; message: string } {
  const doc = jsonBody(body);
  return jsonError(loadJsonRpcErrorCode({ statusCode: status, headers }, doc), doc);
}

/** restJson1 (Bedrock): `x-amzn-errortype`, then `code`, then `__type`, as the SDK reads them. */
export function readRestJsonError(status: number, headers: Record<string, string>, body: Uint8Array): { code: string; message: string } {
  const doc = jsonBody(body);
  return jsonError(loadRestJsonErrorCode({ statusCode: status, headers }, doc), doc);
}

/**
 * A JSON POST to `path` under `origin` (the service endpoint), with the host, length and user
 * agent headers every call sends, and the headers the trace adds.
 */
export function jsonPost(origin: URL, path: string, contentType: string, body: string, headers: Record<string, string>): HttpRequest {
  const port = origin.port ? Number(origin.port) : undefined;
  return new HttpRequest({
    protocol: origin.protocol,
    hostname: origin.hostname,
    port,
    method: 'POST',
    path,
    headers: {
      host: `${origin.hostname}${port !== undefined ? `:${port}` : ''}`,
      'content-type': contentType,
      'content-length': String(Buffer.byteLength(body)),
      'user-agent': USER_AGENT,
      ...headers,
    },
    body,
  });
}

export { HttpRequest };
