/**
 * X-Ray tracing of AWS SDK calls (Powertools Tracer): every client factory passes its client
 * through `traced()`, so each DynamoDB, S3, SQS, SNS, Bedrock, KMS or Transcribe call is a
 * subsegment of the function's trace (the functions run with active tracing, lib/constructs).
 * Outside Lambda (the local runtime, tests) the client is returned as it is.
 *
 * Cold start: the Tracer (and the X-Ray SDK under it) is loaded when a traced client sends its
 * first command, not when the handler module loads; that first send waits for it, adds the X-Ray
 * instrumentation to the client's middleware stack, and every send (the first included) runs
 * through it. Clients sharing one middleware stack (the DynamoDB document client and the client
 * it wraps) share one instrumentation.
 */
import type { Tracer } from '@aws-lambda-powertools/tracer';

let tracer: Promise<Tracer> | null = null;

/** Per middleware stack: adds the X-Ray instrumentation once, on the first send. */
const instrumentation = new WeakMap<object, () => Promise<void>>();

function tracingOn(): boolean {
  return process.env.RUNTIME !== 'local' && Boolean(process.env.AWS_LAMBDA_FUNCTION_NAME) && process.env.POWERTOOLS_TRACE_ENABLED !== 'false';
}

function loadTracer(): Promise<Tracer> {
  tracer ??= import('@aws-lambda-powertools/tracer').then(({ Tracer: T }) => new T({ serviceName: 'media-marketplace' }));
  return tracer;
}

interface SdkClient {
  middlewareStack: object;
  send(...args: unknown[]): Promise<unknown>;
}

/** Resolves once the client's calls carry the X-Ray instrumentation (at once when not traced). */
export function tracingReady(client: unknown): Promise<void> {
  return instrumentation.get((client as SdkClient).middlewareStack)?.() ?? Promise.resolve();
}

export function traced<T>(client: T): T {
  if (!tracingOn()) return client;
  const c = client as unknown as SdkClient;
  let instrument = instrumentation.get(c.middlewareStack);
  if (!instrument) {
    let done: Promise<void> | null = null;
    instrument = () => (done ??= loadTracer().then((t) => void t.captureAWSv3Client(client as never)));
    instrumentation.set(c.middlewareStack, instrument);
  }
  const ready = instrument;
  const send = c.send.bind(c);
  c.send = (...args: unknown[]) => ready().then(() => send(...args));
  return client;
}
