/**
 * API Gateway (REST, Lambda proxy integration) locally: routes each request through the route
 * manifest to its handler module, with the same APIGatewayProxyEvent and result handling
 * (local/proxy-integration.ts) and the same limits (D61, local/http-limits.ts), so what would
 * fail deployed fails here first:
 * - request headers above 10 KiB: 431;
 * - a body above 4 MiB (any route, the unknown ones too): the web ACL's 413, a multipart upload's
 *   pointing to the pre-signed upload (checked by Content-Length when sent, else while the body
 *   streams in), nothing reaches the handler;
 * - an address past the web ACL's per-IP rate rules (local/waf-rate.ts: signups, then every
 *   route, in five minutes): 429 with WAF's fixed body;
 * - a query string above 2,048 bytes or a URI path above 1,024 (AWS's core rule set in the web
 *   ACL, not on the upload routes): the WafBlocked gateway response, 403;
 * - a route past the stage's throttle (local/stage-throttle.ts: 200 a second per method, bursts
 *   of 400): the Throttled gateway response, 429;
 * - the proxy event above Lambda's 6 MB synchronous payload (binary bodies count base64-encoded,
 *   as API Gateway sends them): 413; a handler result above 6 MB: 502;
 * - the function's time-out (28 s; long-poll routes get the wait's budget plus 3 s): 502; the
 *   integration time-out (29 s), which a function's time-out below it never lets a request reach: 504.
 * A request no route takes (an unknown path, or a method its path does not declare) runs the
 * manifest's not-found function, as the ANY methods do deployed: its 404 is D4's envelope with a
 * request id in the body and in X-Request-Id. The answers of the deployed edge itself (413, 429,
 * 403, 502, 504) are those bytes (shared/http/edge.ts): API Gateway's request id or none, and no
 * X-Request-Id; the front's own answers (431, a malformed request) are the error envelope with an
 * X-Request-Id. A refused body is read to its end first (up to a bound), so the client reads the
 * answer instead of a reset.
 */
import { randomUUID } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { APIGatewayProxyResult } from 'aws-lambda';
import { matchRoute, routeLogicalName, UNKNOWN_ROUTE, type RouteDef } from '../shared/manifest/routes';
import { commonRuleBlocking, GATEWAY_RESPONSES, gatewayAnswer, THROTTLED_MESSAGE, wafAnswer } from '../shared/http/edge';
import { isMultipart, multipartTooLarge } from '../shared/work/upload-limits';
import {
  bodyLimitFor,
  BodyTooLarge,
  DEFAULT_TIMEOUTS,
  eventMayExceed,
  LAMBDA_PAYLOAD_BYTES,
  MAX_HEADER_BYTES,
  rawEnvelopeResponse,
  readBody,
  refuseBody,
  requestBudget,
  resultMayExceed,
  writeEdgeAnswer,
  writeErrorEnvelope,
  type IntegrationTimeouts,
} from './http-limits';
import { grantedTo, handlerModuleExists, lambdaContext, loadHandler, routeGrants, type EntryAccess } from './lambda';
import { buildProxyEvent, writeProxyResult } from './proxy-integration';
import { wafRateRules, type WafRateLimits } from './waf-rate';
import { stageThrottle, type StageThrottle } from './stage-throttle';
import type { Log } from './log';
import { runInvocation, type Invocation } from '../shared/observability/invocation';

export { LAMBDA_PAYLOAD_BYTES, MAX_BODY_BYTES, MAX_HEADER_BYTES, writeErrorEnvelope, type IntegrationTimeouts } from './http-limits';
const writeEnvelope = writeErrorEnvelope;

/** A local-only page (e.g. a payment provider's checkout); returns true when it answered. */
export type LocalPage = (req: IncomingMessage, res: ServerResponse) => boolean | Promise<boolean>;

const localPages: LocalPage[] = [];

/** Mounts a local-only page in front of the API routes; returns a function that unmounts it. */
export function registerLocalPage(page: LocalPage): () => void {
  localPages.push(page);
  return () => {
    const i = localPages.indexOf(page);
    if (i >= 0) localPages.splice(i, 1);
  };
}

function normaliseIp(ip: string | undefined): string {
  if (!ip) return '127.0.0.1';
  return ip.startsWith('::ffff:') ? ip.slice(7) : ip;
}

export interface HttpServerOptions {
  log: Log;
  /** Requests wait for this (the environment is set up after the port is bound). */
  ready?: Promise<void>;
  /** Integration time-outs; tests pass short ones. */
  timeouts?: Partial<IntegrationTimeouts>;
  /** Resolves a route's handler module (default: the module named in the manifest). */
  loadHandler?: typeof loadHandler;
  /** The web ACL's per-IP rate rules (local/waf-rate.ts); false: none (tests and benchmarks that send from one address). */
  wafRates?: WafRateLimits | false;
  /** The stage's method throttling (local/stage-throttle.ts); false: none (tests and benchmarks that send faster). */
  throttle?: StageThrottle | false;
}


class IntegrationTimeout extends Error {}

/** A function the front invokes: a route's, or the not-found one. */
interface Invoked {
  id: string;
  /** The resource API Gateway names in the event. */
  path: string;
  handler: string;
  /** Its function's name (the stack's logical name). */
  name: string;
  access: EntryAccess;
  longPoll: boolean;
  grants: ReturnType<typeof routeGrants>;
}

const routeFunction = (r: RouteDef): Invoked => ({
  id: r.id,
  path: r.path,
  handler: r.handler,
  name: routeLogicalName(r),
  access: r.access,
  longPoll: r.longPoll === true,
  grants: routeGrants(r),
});

/** The not-found function (the manifest's UNKNOWN_ROUTE): granted nothing, as deployed (lib/api.ts). */
const UNKNOWN_ROUTE_FUNCTION: Invoked = {
  id: UNKNOWN_ROUTE.id,
  path: UNKNOWN_ROUTE.path,
  handler: UNKNOWN_ROUTE.handler,
  name: 'UnknownRouteFunction',
  access: UNKNOWN_ROUTE.access,
  longPoll: false,
  grants: {},
};

export function createHttpServer(opts: HttpServerOptions): Server {
  const { log } = opts;
  const timeouts: IntegrationTimeouts = { ...DEFAULT_TIMEOUTS, ...opts.timeouts };
  /** Invocations running per function (a timed-out request's function runs on, and still counts). */
  const server = createServer({ maxHeaderSize: MAX_HEADER_BYTES }, (req, res) => {
    handle(req, res).catch((err: unknown) => {
      log.error(`http ${req.method} ${req.url}: adapter failure`, err);
      writeEnvelope(res, 500, 'internal_error', 'An unexpected error occurred. It has been logged; retrying is safe.');
    });
  });

  // An idle keep-alive connection stays open longer than Node's 5 s default: a client reusing one
  // just as the server closed it sees "other side closed" on a busy machine (API Gateway keeps
  // idle client connections far longer than that).
  server.keepAliveTimeout = 65_000;
  server.headersTimeout = 66_000;

  // Errors Node finds while parsing (headers too large, malformed request): answer in the
  // envelope instead of Node's bare status line, then let the client finish sending.
  server.on('clientError', (err: NodeJS.ErrnoException, socket) => {
    if (err.code === 'ECONNRESET' || !socket.writable) return void socket.destroy();
    const answer =
      err.code === 'HPE_HEADER_OVERFLOW'
        ? rawEnvelopeResponse(431, 'Request Header Fields Too Large', 'invalid_request', `The request line and headers exceed ${MAX_HEADER_BYTES} bytes, the API's limit.`)
        : err.code === 'ERR_HTTP_REQUEST_TIMEOUT'
          ? rawEnvelopeResponse(408, 'Request Timeout', 'invalid_request', 'The request was not received in time.')
          : rawEnvelopeResponse(400, 'Bad Request', 'invalid_request', 'The request is not valid HTTP/1.1.');
    socket.on('error', () => undefined);
    socket.resume(); // drain what the client still sends, so it reads the answer rather than a reset
    socket.end(answer);
    setTimeout(() => socket.destroy(), 5_000).unref();
  });

  // `Expect: 100-continue`: refuse an oversized body before the client sends it (the web ACL's 413).
  server.on('checkContinue', (req: IncomingMessage, res: ServerResponse) => {
    const limit = bodyLimitFor(req.headers['content-type']);
    if (Number(req.headers['content-length'] ?? 0) > limit.bytes) {
      writeEdgeAnswer(res, wafAnswer(limit.refuse()), { Connection: 'close' });
      return;
    }
    res.writeContinue();
    server.emit('request', req, res);
  });

  const rateRules = opts.wafRates ? wafRateRules(opts.wafRates) : null;
  const mayGoOn = opts.throttle ? stageThrottle(opts.throttle) : null;

  async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    await opts.ready;
    for (const page of localPages) if (await page(req, res)) return;

    const method = req.method ?? 'GET';
    const target = req.url ?? '/';
    const pathname = new URL(target, 'http://local').pathname;
    // The web ACL first (before API Gateway routes anything): a body over 4 MiB (its first rules),
    // then AWS's core rules' size limits on the query string and the path.
    let body: Buffer;
    try {
      body = await readBody(req, bodyLimitFor(req.headers['content-type']));
    } catch (err) {
      if (!(err instanceof BodyTooLarge)) throw err;
      return refuseBody(res, err);
    }
    // Then its per-IP rate rules (signups, then every route), then AWS's core rules.
    const rateBlock = rateRules?.(normaliseIp(req.socket.remoteAddress), pathname);
    if (rateBlock) return writeEdgeAnswer(res, rateBlock);
    if (commonRuleBlocking(target) !== null) return writeEdgeAnswer(res, gatewayAnswer(GATEWAY_RESPONSES.wafBlocked));

    // A request no route takes runs the not-found function, as the ANY methods route it deployed
    // (there on the path's resource, or the root `{proxy+}`: the function reads neither).
    const match = matchRoute(method, pathname);
    const route = match.route ? routeFunction(match.route) : UNKNOWN_ROUTE_FUNCTION;
    const params = match.route ? match.params : { proxy: pathname.slice(1) };
    // The stage's throttle, per method: API Gateway's own 429, before any function runs.
    if (mayGoOn && !mayGoOn(match.route ? `${method} ${route.path}` : `ANY ${route.path}`)) {
      return writeEdgeAnswer(res, gatewayAnswer(GATEWAY_RESPONSES.throttled, { message: THROTTLED_MESSAGE }));
    }
    if (!handlerModuleExists(route.handler)) {
      log.warn(`http ${method} ${route.path}: ${route.handler} does not exist yet`);
      return writeEnvelope(res, 501, 'internal_error', `${method} ${route.path} (${route.id}) is not implemented yet.`);
    }

    const requestId = randomUUID();
    const event = buildProxyEvent(
      { method, url: req.url ?? '/', rawHeaders: req.rawHeaders, body, sourceIp: normaliseIp(req.socket.remoteAddress), port: req.socket.localPort ?? 0 },
      route,
      params,
      { requestId },
    );
    // Lambda's 6 MB counts the event as sent: a binary body base64-encoded, plus headers.
    if (eventMayExceed(event, LAMBDA_PAYLOAD_BYTES)) {
      const tooBig = isMultipart(req.headers['content-type']) ? multipartTooLarge() : null;
      return writeEnvelope(
        res,
        413,
        'invalid_request',
        tooBig?.message ?? `The request is too large for this route: its function receives at most ${LAMBDA_PAYLOAD_BYTES} bytes, and binary bodies count base64-encoded.`,
        {},
        tooBig?.details ?? [{ field: 'body', code: 'payload_too_large', message: `at most ${LAMBDA_PAYLOAD_BYTES} bytes as the function receives it` }],
      );
    }
    const fnName = route.name;
    const started = Date.now();
    // The function's own time-out (what its context reports); the request's budget is set once the
    // function is loaded, since API Gateway's clock also counts a cold start.
    const fnTimeoutMs = requestBudget(timeouts, route.longPoll).ms;
    let budgetMs = fnTimeoutMs;
    let timeoutStatus: 502 | 504 = 502;
    let result: APIGatewayProxyResult;
    let timer: NodeJS.Timeout | undefined;
    const running: Invocation = { fn: fnName, stopped: false };
    try {
      const handler = grantedTo(route.id, route.access, await (opts.loadHandler ?? loadHandler)(route.handler), route.grants);
      ({ ms: budgetMs, status: timeoutStatus } = requestBudget(timeouts, route.longPoll, Date.now() - started));
      const invocation = Promise.resolve(runInvocation(running, () => handler(event, lambdaContext(fnName, Math.ceil(fnTimeoutMs / 1000))))) as Promise<APIGatewayProxyResult>;
      const timedOut = new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(new IntegrationTimeout()), budgetMs);
      });
      invocation.catch(() => undefined); // after a time-out the late outcome is dropped, as API Gateway drops it
      result = await Promise.race([invocation, timedOut]);
      if (!result || typeof result.statusCode !== 'number') throw new Error('the handler returned no statusCode');
    } catch (err) {
      if (err instanceof IntegrationTimeout) {
        log.warn(`http ${method} ${pathname} → ${route.handler} timed out after ${budgetMs} ms`);
        // 502: the function's own time-out stopped it (the Default5xx gateway response), so it
        // makes no more calls. 504: the gateway gave up (IntegrationTimeout), the function may
        // still complete. Both with API Gateway's request id, no X-Request-Id.
        if (timeoutStatus === 502) {
          running.stopped = true;
          return writeEdgeAnswer(res, gatewayAnswer(GATEWAY_RESPONSES.default5xx, { status: 502, requestId }));
        }
        return writeEdgeAnswer(res, gatewayAnswer(GATEWAY_RESPONSES.integrationTimeout, { status: 504, requestId }));
      }
      // A function that threw (or answered no status): API Gateway's 502, the Default5xx gateway response.
      log.error(`http ${method} ${pathname} → ${route.handler} failed`, err);
      return writeEdgeAnswer(res, gatewayAnswer(GATEWAY_RESPONSES.default5xx, { status: 502, requestId }));
    } finally {
      clearTimeout(timer);
    }
    // Lambda refuses a response above 6 MB; API Gateway then answers 502 (Default5xx).
    if (resultMayExceed(result, LAMBDA_PAYLOAD_BYTES)) {
      log.error(`http ${method} ${pathname} → ${route.handler}: response above ${LAMBDA_PAYLOAD_BYTES} bytes`);
      return writeEdgeAnswer(res, gatewayAnswer(GATEWAY_RESPONSES.default5xx, { status: 502, requestId }));
    }
    writeProxyResult(res, result, requestId, req.headers.accept);
    log.info(`${method} ${req.url} → ${result.statusCode} (${Date.now() - started} ms)`);
  }

  return server;
}
