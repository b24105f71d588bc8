/**
 * API Gateway's Lambda proxy integration (REST API, payload format 1.0) locally: how a request
 * becomes the APIGatewayProxyEvent API Gateway sends a route's function, and how the function's
 * APIGatewayProxyResult is written back as API Gateway writes it. The event has API Gateway's
 * header and query-string maps (the last value of a repeated one in the single-value map, a query
 * string split at an unencoded `;` as at `&`), the X-Forwarded-* headers it adds, and a body
 * base64-encoded only for the API's binary media types (shared/http/edge.ts); a base64 result is
 * sent as bytes only when the client's first Accept value is a binary media type. The local HTTP
 * front (local/http.ts) builds the event and writes the result of every request it routes.
 */
import { randomUUID } from 'node:crypto';
import type { ServerResponse } from 'node:http';
import type { APIGatewayProxyEvent, APIGatewayProxyResult } from 'aws-lambda';
import type { RouteDef } from '../shared/manifest/routes';
import { isBinaryMediaType } from '../shared/http/edge';
import { LOCAL_ACCOUNT_ID } from './lambda';

export const STAGE = 'local';
const API_ID = 'local';

/** What the adapter needs of an incoming request (node's IncomingMessage provides it). */
export interface ProxyRequest {
  method: string;
  /** Path and query string as received. */
  url: string;
  /** Header names in their original case, values in order: `[name, value, name, value, ...]`. */
  rawHeaders: string[];
  body: Buffer;
  sourceIp: string;
  /** Port of the local server, reported in X-Forwarded-Port. */
  port: number;
}

const NO_IDENTITY = {
  accessKey: null,
  accountId: null,
  apiKey: null,
  apiKeyId: null,
  caller: null,
  clientCert: null,
  cognitoAuthenticationProvider: null,
  cognitoAuthenticationType: null,
  cognitoIdentityId: null,
  cognitoIdentityPoolId: null,
  principalOrgId: null,
  user: null,
  userArn: null,
};

/** `09/Apr/2015:12:34:56 +0000`, the format of requestContext.requestTime. */
function clfTime(d: Date): string {
  const months = ['Jan', 'Feb', 'Mar', 'Apr', 'May', 'Jun', 'Jul', 'Aug', 'Sep', 'Oct', 'Nov', 'Dec'];
  const p = (n: number) => String(n).padStart(2, '0');
  return `${p(d.getUTCDate())}/${months[d.getUTCMonth()]}/${d.getUTCFullYear()}:${p(d.getUTCHours())}:${p(d.getUTCMinutes())}:${p(d.getUTCSeconds())} +0000`;
}

function headerMaps(rawHeaders: string[]): { headers: Record<string, string>; multi: Record<string, string[]> } {
  const multi: Record<string, string[]> = {};
  const canonical = new Map<string, string>(); // lower-case name → first spelling seen
  for (let i = 0; i + 1 < rawHeaders.length; i += 2) {
    const name = rawHeaders[i]!;
    const key = canonical.get(name.toLowerCase()) ?? name;
    canonical.set(name.toLowerCase(), key);
    (multi[key] ??= []).push(rawHeaders[i + 1]!);
  }
  // Single-value map: the last value of a repeated header, as API Gateway does.
  const headers = Object.fromEntries(Object.entries(multi).map(([k, v]) => [k, v[v.length - 1]!]));
  return { headers, multi };
}

/** Adds the X-Forwarded-* headers API Gateway adds in front of the integration. */
function addForwardedHeaders(raw: string[], req: ProxyRequest): string[] {
  const out = [...raw];
  const idx = out.findIndex((v, i) => i % 2 === 0 && v.toLowerCase() === 'x-forwarded-for');
  if (idx >= 0) out[idx + 1] = `${out[idx + 1]}, ${req.sourceIp}`;
  else out.push('X-Forwarded-For', req.sourceIp);
  const has = (n: string) => out.some((v, i) => i % 2 === 0 && v.toLowerCase() === n);
  if (!has('x-forwarded-port')) out.push('X-Forwarded-Port', String(req.port));
  if (!has('x-forwarded-proto')) out.push('X-Forwarded-Proto', 'http');
  return out;
}

/** The APIGatewayProxyEvent (REST API, payload 1.0) API Gateway sends for a matched route. */
export function buildProxyEvent(
  req: ProxyRequest,
  route: Pick<RouteDef, 'path'>,
  params: Record<string, string>,
  opts: { now?: Date; requestId?: string } = {},
): APIGatewayProxyEvent {
  const now = opts.now ?? new Date();
  const url = new URL(req.url, 'http://local');
  const { headers, multi } = headerMaps(addForwardedHeaders(req.rawHeaders, req));

  const multiQuery: Record<string, string[]> = {};
  // API Gateway (REST) splits a query string at an unencoded `;` as at `&`
  // (https://docs.aws.amazon.com/apigateway/latest/developerguide/api-gateway-known-issues.html).
  for (const [k, v] of new URLSearchParams(url.search.slice(1).replace(/;/g, '&'))) (multiQuery[k] ??= []).push(v);
  const hasQuery = Object.keys(multiQuery).length > 0;
  const query = Object.fromEntries(Object.entries(multiQuery).map(([k, v]) => [k, v[v.length - 1]!]));

  const contentType = Object.entries(headers).find(([k]) => k.toLowerCase() === 'content-type')?.[1];
  const userAgent = Object.entries(headers).find(([k]) => k.toLowerCase() === 'user-agent')?.[1] ?? null;
  const host = Object.entries(headers).find(([k]) => k.toLowerCase() === 'host')?.[1];
  // As API Gateway: base64 only for the API's binary media types; any other body as UTF-8 text
  // (bytes that are not UTF-8 arrive mangled there, and so here).
  const binary = req.body.length > 0 && isBinaryMediaType(contentType);
  const body = req.body.length === 0 ? null : binary ? req.body.toString('base64') : req.body.toString('utf8');

  return {
    resource: route.path,
    path: url.pathname,
    httpMethod: req.method,
    headers,
    multiValueHeaders: multi,
    queryStringParameters: hasQuery ? query : null,
    multiValueQueryStringParameters: hasQuery ? multiQuery : null,
    pathParameters: Object.keys(params).length ? { ...params } : null,
    stageVariables: null,
    requestContext: {
      accountId: LOCAL_ACCOUNT_ID,
      apiId: API_ID,
      authorizer: null,
      domainName: host,
      domainPrefix: host?.split('.')[0],
      extendedRequestId: randomUUID(),
      httpMethod: req.method,
      identity: { ...NO_IDENTITY, sourceIp: req.sourceIp, userAgent },
      path: `/${STAGE}${url.pathname}`,
      protocol: 'HTTP/1.1',
      requestId: opts.requestId ?? randomUUID(),
      requestTime: clfTime(now),
      requestTimeEpoch: now.getTime(),
      resourceId: route.path,
      resourcePath: route.path,
      stage: STAGE,
    },
    body,
    isBase64Encoded: binary,
  };
}

/** Writes a handler's APIGatewayProxyResult as API Gateway would. */
export function writeProxyResult(res: ServerResponse, result: APIGatewayProxyResult, requestId: string, accept?: string): void {
  const headers: Record<string, string | string[]> = {};
  for (const [k, values] of Object.entries(result.multiValueHeaders ?? {})) headers[k] = values.map(String);
  for (const [k, v] of Object.entries(result.headers ?? {})) headers[k] = String(v);
  const names = Object.keys(headers).map((k) => k.toLowerCase());
  if (!names.includes('content-type')) headers['Content-Type'] = 'application/json';
  headers['x-amzn-RequestId'] = requestId;
  // A base64 body is sent as bytes only when the client's first Accept value is a binary media
  // type, as API Gateway decides; otherwise the client gets the base64 text.
  const decode = result.isBase64Encoded === true && isBinaryMediaType(accept);
  const body = decode ? Buffer.from(result.body ?? '', 'base64') : Buffer.from(result.body ?? '', 'utf8');
  res.writeHead(result.statusCode, { ...headers, 'Content-Length': String(body.length) });
  res.end(body);
}
