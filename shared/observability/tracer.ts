/**
 * X-Ray tracing of AWS SDK calls: every client factory passes its client through `traced()`, so
 * each DynamoDB, S3, SQS, SNS, Bedrock, KMS or Transcribe call is a subsegment of the function's
 * trace (the functions run with active tracing, lib/constructs). Outside Lambda (the local runtime,
 * tests) the client is returned as it is.
 *
 * What it sends is what the X-Ray SDK's AWS SDK v3 instrumentation sends (and Powertools Tracer's
 * `captureAWSv3Client`, which used it, did before): for each call, once it has answered, one
 * subsegment document (`namespace: "aws"`, the service as name, `aws.operation`, region, request
 * id, retries, the table, queue or bucket, `http.response.status`, the error, throttle and fault
 * flags and the exception) to the Lambda X-Ray daemon over UDP, under the function's segment from
 * `_X_AMZN_TRACE_ID`; the request carries `X-Amzn-Trace-Id` with the subsegment as parent. The wire
 * format is X-Ray's published one ("Sending segment documents to the X-Ray daemon"): the header
 * line `{"format":"json","version":1}` and the document. Only sampled invocations are sent.
 *
 * Why not the X-Ray SDK: it is in maintenance mode since 2026-02-25 (end of support 2027-02-25),
 * and with cls-hooked and semver it was about 115 KB of every function's bundle, about a ninth of
 * each cold module load (docs/benchmarks.md), for the one feature used here.
 */
import { randomBytes } from 'node:crypto';
import type { Socket } from 'node:dgram';
import { InvokeStore } from '@aws/lambda-invoke-store';
import { answerAsDeployed, attempt, callAsDeployed, checkCall } from './invocation';

/** The middleware's name in a client's stack (one per stack). */
export const XRAY_MIDDLEWARE = 'XRaySubsegment';

const HEADER = '{"format":"json","version":1}\n';

function tracingOn(): boolean {
  return process.env.RUNTIME !== 'local' && Boolean(process.env.AWS_LAMBDA_FUNCTION_NAME) && process.env.TRACE_AWS_CALLS !== 'false';
}

interface TraceContext {
  root: string;
  parent: string;
  extra: string;
}

/**
 * The invocation's trace, null when not sampled: from Lambda's invoke store when the runtime keeps
 * one (several invocations at once in one process), else `_X_AMZN_TRACE_ID`, which Lambda sets per
 * invocation; the AWS SDK's own recursion-detection middleware reads them in the same order.
 */
async function currentTrace(): Promise<TraceContext | null> {
  const store = await InvokeStore.getInstanceAsync().catch(() => undefined);
  const header = store?.getXRayTraceId() ?? process.env._X_AMZN_TRACE_ID;
  if (!header) return null;
  const fields = new Map(
    header.split(';').map((kv) => {
      const i = kv.indexOf('=');
      return [kv.slice(0, i).trim(), kv.slice(i + 1).trim()] as const;
    }),
  );
  const root = fields.get('Root');
  const parent = fields.get('Parent');
  if (!root || !parent || fields.get('Sampled') !== '1') return null;
  const extra = [...fields].filter(([k]) => k !== 'Root' && k !== 'Parent' && k !== 'Sampled').map(([k, v]) => `;${k}=${v}`).join('');
  return { root, parent, extra };
}

/** `AWS_XRAY_DAEMON_ADDRESS`: `host:port`, or `udp:host:port tcp:host:port` in either order. */
export function daemonAddress(value = process.env.AWS_XRAY_DAEMON_ADDRESS): { host: string; port: number } {
  const udp = (value ?? '').split(/\s+/).find((p) => p.startsWith('udp:')) ?? (value ?? '').split(/\s+/).find((p) => !p.startsWith('tcp:'));
  const m = /^(?:udp:)?(.+):(\d+)$/.exec(udp ?? '');
  return m ? { host: m[1]!, port: Number(m[2]) } : { host: '127.0.0.1', port: 2000 };
}

let socket: Socket | null = null;

function emit(doc: object): void {
  const { host, port } = daemonAddress();
  // node:dgram is loaded by the first segment sent, not at every cold start of every function
  // (X-Ray is sampled, and locally off).
  socket ??= process.getBuiltinModule('node:dgram').createSocket('udp4').unref();
  // Fire and forget, as the X-Ray SDK does: a trace must never fail or slow the call it describes.
  socket.send(HEADER + JSON.stringify(doc), port, host, () => undefined);
}

interface Metadata {
  httpStatusCode?: number;
  requestId?: string;
  extendedRequestId?: string;
  attempts?: number;
}

/** The request parameters X-Ray records for a call (its default whitelist, for the services used here). */
function resourceOf(service: string, input: Record<string, unknown>): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  if (typeof input.TableName === 'string') out.table_name = input.TableName;
  if (input.RequestItems && typeof input.RequestItems === 'object') out.table_names = Object.keys(input.RequestItems);
  if (Array.isArray(input.TransactItems)) {
    const tables = new Set<string>();
    for (const item of input.TransactItems as Record<string, { TableName?: string }>[]) {
      for (const op of Object.values(item)) if (op?.TableName) tables.add(op.TableName);
    }
    out.table_names = [...tables];
  }
  if (typeof input.QueueUrl === 'string') out.queue_url = input.QueueUrl;
  if (service === 'S3') {
    if (typeof input.Bucket === 'string') out.bucket_name = input.Bucket;
    if (typeof input.Key === 'string') out.key = input.Key;
  }
  return out;
}

const THROTTLES = new Set(['ThrottlingException', 'ProvisionedThroughputExceededException', 'RequestLimitExceeded', 'TooManyRequestsException', 'SlowDown', 'Throttling']);

type Handler = (args: { input?: Record<string, unknown>; request?: { headers?: Record<string, string> } }) => Promise<{ output?: { $metadata?: Metadata } }>;
interface Context {
  clientName?: string;
  commandName?: string;
}
interface MiddlewareStack {
  add(mw: (next: Handler, context: Context) => Handler, options: { step: 'initialize' | 'build' | 'finalizeRequest'; name: string }): void;
  identify(): string[];
}
interface SdkClient {
  middlewareStack: MiddlewareStack;
  config?: { region?: string | (() => Promise<string>) };
}

function xrayMiddleware(client: SdkClient) {
  return (next: Handler, context: Context): Handler =>
    async (args) => {
      const trace = await currentTrace();
      if (!trace) return next(args);
      const id = randomBytes(8).toString('hex');
      if (args.request?.headers) args.request.headers['X-Amzn-Trace-Id'] = `Root=${trace.root};Parent=${id};Sampled=1${trace.extra}`;
      const service = (context.clientName ?? 'AWSClient').replace(/Client$/, '');
      const operation = (context.commandName ?? 'Command').replace(/Command$/, '');
      const start = Date.now() / 1000;
      const document = async (meta: Metadata | undefined, error?: Error & { $fault?: string }) => {
        const region = typeof client.config?.region === 'function' ? await client.config.region().catch(() => undefined) : client.config?.region;
        const status = meta?.httpStatusCode;
        const throttled = status === 429 || (error !== undefined && THROTTLES.has(error.name));
        // 4xx: error; 5xx, or no answer at all (a network failure, a time-out): fault.
        const fault = status !== undefined ? status >= 500 : error?.$fault !== 'client';
        return {
          id,
          trace_id: trace.root,
          parent_id: trace.parent,
          type: 'subsegment',
          name: service,
          namespace: 'aws',
          start_time: start,
          end_time: Date.now() / 1000,
          aws: {
            operation,
            ...(region ? { region } : {}),
            ...(meta?.requestId ? { request_id: meta.requestId } : {}),
            ...(service === 'S3' && meta?.extendedRequestId ? { id_2: meta.extendedRequestId } : {}),
            retries: Math.max(0, (meta?.attempts ?? 1) - 1),
            ...resourceOf(service, args.input ?? {}),
          },
          ...(status !== undefined ? { http: { response: { status } } } : {}),
          ...(error
            ? {
                ...(throttled ? { throttle: true } : {}),
                ...(fault ? { fault: true } : { error: true }),
                cause: { exceptions: [{ id: randomBytes(8).toString('hex'), type: error.name, message: error.message, remote: status !== undefined }] },
              }
            : {}),
        };
      };
      const record = async (meta: Metadata | undefined, error?: Error) => {
        try {
          emit(await document(meta, error));
        } catch {
          // A trace must never fail the call it describes.
        }
      };
      try {
        const result = await next(args);
        await record(result.output?.$metadata);
        return result;
      } catch (e) {
        const err = e as Error & { $metadata?: Metadata };
        await record(err.$metadata, err);
        throw e;
      }
    };
}

const CHECK_MIDDLEWARE = 'invocationCheck';

/**
 * Adds the X-Ray instrumentation to a client's middleware stack (once per stack: the DynamoDB
 * document client shares the stack of the client it wraps) when running in Lambda; and, on every
 * client, `checkCall` before each call (invocation.ts: a no-op deployed; in the local runtime a
 * stopped invocation makes no more calls and every call is held to the function's grants).
 */
export function traced<T>(client: T): T {
  const c = client as unknown as SdkClient;
  if (!c.middlewareStack.identify().some((m) => m.startsWith(CHECK_MIDDLEWARE))) {
    c.middlewareStack.add(
      (next, context) => (args) => {
        checkCall(context.clientName ?? '', context.commandName ?? '', args.input);
        const send = (input: unknown) => next(input === args.input ? args : { ...args, input: input as typeof args.input });
        return callAsDeployed(context.clientName ?? '', context.commandName ?? '', args.input, send).catch((err: unknown) => {
          throw answerAsDeployed(context.clientName ?? '', context.commandName ?? '', args.input, err);
        });
      },
      { step: 'initialize', name: CHECK_MIDDLEWARE },
    );
    // Inside the SDK's retry loop: locally, no retry of a stopped invocation goes out either, and
    // what the local runtime answers in DynamoDB's place meets the SDK's retry rules as an answer would.
    c.middlewareStack.add(
      (next, context) => (args) => attempt(context.clientName ?? '', context.commandName ?? '', args.input, () => next(args)),
      { step: 'finalizeRequest', name: `${CHECK_MIDDLEWARE}Attempt` },
    );
  }
  if (!tracingOn()) return client;
  if (!c.middlewareStack.identify().some((m) => m.startsWith(XRAY_MIDDLEWARE))) {
    c.middlewareStack.add(xrayMiddleware(c), { step: 'build', name: XRAY_MIDDLEWARE });
  }
  return client;
}

/**
 * `traced()` for a call made without an SDK client (shared/storage/object-client.ts): `checkCall`
 * first, then `send` inside the same X-Ray subsegment an SDK call gets. `send` is handed the
 * headers to add to its request (the trace header when sampled) and answers with the call's
 * `$metadata`; a failure should carry `$metadata` and a `name` as the SDK's errors do.
 */
export async function tracedCall<T extends { $metadata?: Metadata }>(
  call: { clientName: string; commandName: string; region: string },
  input: Record<string, unknown>,
  send: (headers: Record<string, string>) => Promise<T>,
): Promise<T> {
  checkCall(call.clientName, call.commandName, input);
  try {
    return await tracedSend(call, input, send);
  } catch (err) {
    throw answerAsDeployed(call.clientName, call.commandName, input, err);
  }
}

async function tracedSend<T extends { $metadata?: Metadata }>(
  call: { clientName: string; commandName: string; region: string },
  input: Record<string, unknown>,
  send: (headers: Record<string, string>) => Promise<T>,
): Promise<T> {
  if (!tracingOn()) return send({});
  const mw = xrayMiddleware({ middlewareStack: undefined as never, config: { region: call.region } });
  const handler = mw(async (args) => ({ output: await send(args.request?.headers ?? {}) }), call);
  const { output } = await handler({ input, request: { headers: {} } });
  return output as T;
}
