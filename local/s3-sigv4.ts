/**
 * A verifying front for the S3 emulator (D61): s3rver accepts whatever it is sent, so without this
 * no local run could see a pre-signed URL that real S3 refuses. Every request is checked as S3
 * checks Signature Version 4 before it reaches the emulator; a refused request never does, so
 * nothing is stored.
 *
 * - Pre-signed URLs (`X-Amz-Algorithm`, `X-Amz-Credential`, `X-Amz-Date`, `X-Amz-Expires`,
 *   `X-Amz-SignedHeaders`, `X-Amz-Signature` in the query): the canonical request is rebuilt from
 *   the request as received, so a signed header (Content-Type, Content-Length, Host) with another
 *   value, another path or query, or a tampered signature is 403 `SignatureDoesNotMatch`; a request
 *   after `X-Amz-Date + X-Amz-Expires` is 403 `AccessDenied` "Request has expired"; an `x-amz-*`
 *   header the URL did not sign (an ACL, metadata, a storage class) is 403 `AccessDenied`.
 * - `Authorization: AWS4-HMAC-SHA256 …` (the SDK's own calls): the same check, the
 *   `x-amz-content-sha256` payload hash verified against the body when it is a hash, and a clock
 *   skew above 15 minutes refused (`RequestTimeTooSkewed`).
 * - A stated body checksum (`x-amz-checksum-<algorithm>` in a header or in the pre-signed query:
 *   crc32, crc32c, crc64nvme, sha1, sha256, sha512, md5, xxhash64, xxhash3, xxhash128; or
 *   Content-MD5) must match the body: 400 `BadDigest` otherwise, as S3 answers; an algorithm S3
 *   does not know is 400. An aws-chunked (`STREAMING-…`) body is refused (501), never passed
 *   unchecked.
 * - A PutObject with `If-None-Match: *` (the pre-signed upload URLs sign it) is a conditional
 *   write, as in S3: 412 `PreconditionFailed` when the key already holds an object, checked and
 *   written under a per-key lock so two racing writes cannot both land; another If-None-Match value
 *   is 501 `NotImplemented`.
 * - Multipart calls as S3 answers them (s3-multipart.ts): a completion is checked against the
 *   parts stored (order, ETags, 5 MiB minimum of every part but the last), an unknown upload id is
 *   404 `NoSuchUpload`, and AbortMultipartUpload (which s3rver lacks) deletes the parts.
 * - Anything else (anonymous) is 403 `AccessDenied`, as for a private bucket; CORS preflights pass.
 * Failures answer S3's XML error shape.
 *
 * The canonical request, string to sign and signing key are those of `@smithy/signature-v4`, the
 * SDK's own signer; only the parsing of what arrived is done here.
 */
import { createHash, createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import { crc32 } from 'node:zlib';
import { Crc32c, Crc64NvmeJs } from '@aws-sdk/checksums/crc';
import { Xxh3_128, Xxh3_64, Xxh64 } from '@aws-sdk/checksums/xxh';
import { createServer, request as httpRequest, type IncomingHttpHeaders, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { getCanonicalHeaders, SignatureV4 } from '@smithy/signature-v4';
import type { HttpRequest, SourceData } from '@smithy/types';
import { now } from '../shared/clock';
import { MultipartUploads, multipartCall } from './s3-multipart';

const ALGORITHM = 'AWS4-HMAC-SHA256';
const UNSIGNED_PAYLOAD = 'UNSIGNED-PAYLOAD';
const MAX_SKEW_MS = 15 * 60 * 1000;
const MAX_PRESIGNED_EXPIRES = 7 * 24 * 3600;

export interface Credentials {
  accessKeyId: string;
  secretAccessKey: string;
}

/** Temporary credentials (an assumed role's, local/sts.ts): the token must come along, and they expire. */
export interface TemporaryCredentials extends Credentials {
  sessionToken: string;
  expiration: Date;
}

/** The credentials of an access key id, or undefined for one that does not exist. */
export type CredentialLookup = (accessKeyId: string) => Credentials | TemporaryCredentials | undefined;

/** What the verifier needs of a request as it arrived. */
export interface ArrivedRequest {
  method: string;
  /** Path and query exactly as on the request line. */
  url: string;
  /** `[name, value, name, value, …]` as received. */
  rawHeaders: string[];
}

/** A checksum the request states for its body (header or pre-signed query), as S3 verifies it. */
export interface StatedChecksum {
  /** `crc32`, `sha1`, `sha256`, `md5` (Content-MD5), or another algorithm S3 knows. */
  algorithm: string;
  base64: string;
}

export type SigV4Verdict =
  | {
      ok: true;
      kind: 'presigned' | 'header';
      /** hex SHA-256 the body must have, when the request signed one */
      payloadSha256: string | null;
      checksums: StatedChecksum[];
    }
  | { ok: false; status: number; code: string; message: string; extra?: Record<string, string> };

const toBuffer = (d: SourceData): Buffer =>
  typeof d === 'string' ? Buffer.from(d) : ArrayBuffer.isView(d) ? Buffer.from(d.buffer, d.byteOffset, d.byteLength) : Buffer.from(d);

/** SHA-256 / HMAC-SHA-256 in the shape the smithy signer expects. */
class NodeSha256 {
  private readonly hash;
  constructor(secret?: SourceData) {
    this.hash = secret === undefined ? createHash('sha256') : createHmac('sha256', toBuffer(secret));
  }
  update(data: SourceData): void {
    this.hash.update(toBuffer(data));
  }
  digest(): Promise<Uint8Array> {
    return Promise.resolve(new Uint8Array(this.hash.digest()));
  }
}

/** The smithy signer with its canonical-request steps opened for verification. */
class Verifier extends SignatureV4 {
  constructor(credentials: Credentials, region: string) {
    // S3 signs the path as sent (no second encoding, no normalisation).
    super({ credentials, region, service: 's3', sha256: NodeSha256, uriEscapePath: false, applyChecksum: false });
  }

  async expectedSignature(request: HttpRequest, signedHeaders: string[], payloadHash: string, longDate: string, scope: string): Promise<string> {
    const canonicalHeaders = getCanonicalHeaders(request, undefined, new Set(signedHeaders));
    const canonicalRequest = this.createCanonicalRequest(request, canonicalHeaders, payloadHash);
    const stringToSign = await this.createStringToSign(longDate, scope, canonicalRequest, ALGORITHM);
    const [, region, service] = scope.split('/');
    return this.sign(stringToSign, { signingDate: parseAmzDate(longDate)!, signingRegion: region, signingService: service });
  }
}

/** `20261123T180000Z` → Date, or null. */
function parseAmzDate(s: string | undefined): Date | null {
  const m = /^(\d{4})(\d{2})(\d{2})T(\d{2})(\d{2})(\d{2})Z$/.exec(s ?? '');
  if (!m) return null;
  const d = new Date(Date.UTC(+m[1]!, +m[2]! - 1, +m[3]!, +m[4]!, +m[5]!, +m[6]!));
  return Number.isNaN(d.getTime()) ? null : d;
}

function decode(s: string): string | null {
  try {
    return decodeURIComponent(s);
  } catch {
    return null;
  }
}

/** The query as a map of decoded names to values (arrays when repeated), or null when malformed. */
function parseQuery(raw: string): Record<string, string | string[]> | null {
  const out: Record<string, string | string[]> = {};
  for (const pair of raw.split('&')) {
    if (!pair) continue;
    const eq = pair.indexOf('=');
    const name = decode(eq < 0 ? pair : pair.slice(0, eq));
    const value = decode(eq < 0 ? '' : pair.slice(eq + 1));
    if (name === null || value === null) return null;
    const prev = out[name];
    out[name] = prev === undefined ? value : Array.isArray(prev) ? [...prev, value] : [prev, value];
  }
  return out;
}

/** Header values by lower-case name, repeated headers joined with "," (SigV4's rule). */
function headerBag(rawHeaders: string[]): Record<string, string> {
  const bag: Record<string, string> = {};
  for (let i = 0; i + 1 < rawHeaders.length; i += 2) {
    const name = rawHeaders[i]!.toLowerCase();
    const value = rawHeaders[i + 1]!.trim();
    bag[name] = bag[name] === undefined ? value : `${bag[name]},${value}`;
  }
  return bag;
}

const denied = (message = 'Access Denied'): SigV4Verdict => ({ ok: false, status: 403, code: 'AccessDenied', message });
const mismatch = (): SigV4Verdict => ({
  ok: false,
  status: 403,
  code: 'SignatureDoesNotMatch',
  message: 'The request signature we calculated does not match the signature you provided. Check your key and signing method.',
});

function sameHex(a: string, b: string): boolean {
  const x = Buffer.from(a);
  const y = Buffer.from(b);
  return x.length === y.length && timingSafeEqual(x, y);
}

/**
 * Checks one request's SigV4 signature. `at` is the server time for expiry (the app's clock, which
 * also dated the pre-signed URLs and the temporary credentials); header signatures are held to the
 * real clock (the SDK's). Temporary credentials (an assumed role's) need their session token
 * (`X-Amz-Security-Token`) and are refused once expired (400 `ExpiredToken`), whatever the URL's
 * own expiry: a pre-signed URL lives only as long as the credentials that signed it.
 */
export async function verifySigV4(
  req: ArrivedRequest,
  credentials: Credentials | CredentialLookup,
  region: string,
  at: Date = now(),
  expectService = 's3',
): Promise<SigV4Verdict> {
  const lookup: CredentialLookup = typeof credentials === 'function' ? credentials : (id) => (id === credentials.accessKeyId ? credentials : undefined);
  const q = req.url.indexOf('?');
  const path = q < 0 ? req.url : req.url.slice(0, q);
  const query = parseQuery(q < 0 ? '' : req.url.slice(q + 1));
  if (!query) return { ok: false, status: 400, code: 'InvalidArgument', message: 'The query string is malformed.' };
  const headers = headerBag(req.rawHeaders);
  const str = (v: string | string[] | undefined) => (Array.isArray(v) ? v[0] : v);

  let credential: string | undefined;
  let signedHeaders: string | undefined;
  let signature: string | undefined;
  let amzDate: string | undefined;
  let payloadHash: string;
  let kind: 'presigned' | 'header';
  /** The signer's temporary credentials, once the signature checked out (their expiry is checked after the URL's). */
  let temporary: TemporaryCredentials | null = null;
  const expiredToken = (): SigV4Verdict | null =>
    temporary && at.getTime() >= temporary.expiration.getTime() ? { ok: false, status: 400, code: 'ExpiredToken', message: 'The provided token has expired.' } : null;
  if (query['X-Amz-Algorithm'] !== undefined || query['X-Amz-Signature'] !== undefined) {
    kind = 'presigned';
    if (str(query['X-Amz-Algorithm']) !== ALGORITHM) return { ok: false, status: 400, code: 'AuthorizationQueryParametersError', message: 'X-Amz-Algorithm only supports "AWS4-HMAC-SHA256".' };
    credential = str(query['X-Amz-Credential']);
    signedHeaders = str(query['X-Amz-SignedHeaders']);
    signature = str(query['X-Amz-Signature']);
    amzDate = str(query['X-Amz-Date']);
    const expiresRaw = str(query['X-Amz-Expires']);
    const expires = Number(expiresRaw);
    const date = parseAmzDate(amzDate);
    if (!credential || !signedHeaders || !signature || !date || !expiresRaw || !/^\d+$/.test(expiresRaw)) {
      return { ok: false, status: 400, code: 'AuthorizationQueryParametersError', message: 'Query-string authentication version 4 requires the X-Amz-Algorithm, X-Amz-Credential, X-Amz-Signature, X-Amz-Date, X-Amz-SignedHeaders, and X-Amz-Expires parameters.' };
    }
    if (expires < 1 || expires > MAX_PRESIGNED_EXPIRES) {
      return { ok: false, status: 400, code: 'AuthorizationQueryParametersError', message: 'X-Amz-Expires must be between 1 and 604800 seconds.' };
    }
    payloadHash = str(query['X-Amz-Content-Sha256']) ?? UNSIGNED_PAYLOAD;
    const expiresAt = new Date(date.getTime() + expires * 1000);
    const verdict = await check();
    if (!verdict.ok) return verdict;
    if (at.getTime() > expiresAt.getTime()) {
      return {
        ok: false,
        status: 403,
        code: 'AccessDenied',
        message: 'Request has expired',
        extra: { 'X-Amz-Expires': String(expires), Expires: iso(expiresAt), ServerTime: iso(at) },
      };
    }
    if (date.getTime() - at.getTime() > MAX_SKEW_MS) return denied('Request is not valid yet');
    return expiredToken() ?? verdict;
  }

  const auth = headers.authorization;
  if (!auth) return denied();
  const m = /^AWS4-HMAC-SHA256\s+Credential=([^,\s]+),\s*SignedHeaders=([^,\s]+),\s*Signature=([0-9a-f]+)\s*$/.exec(auth);
  if (!m) return { ok: false, status: 400, code: 'AuthorizationHeaderMalformed', message: 'The authorization header is malformed.' };
  kind = 'header';
  [, credential, signedHeaders, signature] = m;
  amzDate = headers['x-amz-date'];
  const date = parseAmzDate(amzDate);
  if (!date) return denied('AWS authentication requires a valid Date or x-amz-date header');
  if (Math.abs(Date.now() - date.getTime()) > MAX_SKEW_MS) {
    return { ok: false, status: 403, code: 'RequestTimeTooSkewed', message: 'The difference between the request time and the current time is too large.' };
  }
  payloadHash = headers['x-amz-content-sha256'] ?? '';
  if (!payloadHash) return { ok: false, status: 400, code: 'InvalidRequest', message: 'Missing required header for this request: x-amz-content-sha256' };
  // aws-chunked bodies (a signature per chunk, trailing checksums) are not verified here: refused
  // rather than passed unchecked, so no code path relies on what this emulator cannot check.
  if (payloadHash.startsWith('STREAMING-')) {
    return { ok: false, status: 501, code: 'NotImplemented', message: `The local S3 does not verify ${payloadHash} (aws-chunked) payloads; send the body with its SHA-256 or UNSIGNED-PAYLOAD.` };
  }
  const verdict = await check();
  return verdict.ok ? (expiredToken() ?? verdict) : verdict;

  async function check(): Promise<SigV4Verdict> {
    // Credential = <access key>/<yyyymmdd>/<region>/s3/aws4_request
    const parts = credential!.split('/');
    if (parts.length !== 5 || parts[4] !== 'aws4_request') {
      return { ok: false, status: 400, code: kind === 'presigned' ? 'AuthorizationQueryParametersError' : 'AuthorizationHeaderMalformed', message: 'The credential is malformed.' };
    }
    const [accessKeyId, day, credRegion, service] = parts as [string, string, string, string];
    const found = lookup(accessKeyId);
    if (!found) {
      return { ok: false, status: 403, code: 'InvalidAccessKeyId', message: 'The AWS Access Key Id you provided does not exist in our records.' };
    }
    if (service !== expectService || credRegion !== region || day !== amzDate!.slice(0, 8)) return mismatch();
    const names = signedHeaders!.split(';');
    if (!names.includes('host')) return denied('Host must be a signed header');
    // S3 refuses x-amz-* headers that the signature does not cover, in a signed header and in a
    // pre-signed URL alike (an ACL, metadata, tagging or storage class the signer never authorised).
    const unsigned = Object.keys(headers).filter((h) => h.startsWith('x-amz-') && !names.includes(h));
    if (unsigned.length) {
      return { ok: false, status: 403, code: 'AccessDenied', message: 'There were headers present in the request which were not signed', extra: { HeadersNotSigned: unsigned.join(', ') } };
    }
    const signedBag: Record<string, string> = {};
    for (const n of names) signedBag[n] = headers[n] ?? '';
    const queryForSigning = { ...query! };
    delete queryForSigning['X-Amz-Signature'];
    const request = { method: req.method, protocol: 'http:', hostname: headers.host ?? '', path, query: queryForSigning, headers: signedBag } as unknown as HttpRequest;
    const expected = await new Verifier(found, region).expectedSignature(request, names, payloadHash, amzDate!, `${day}/${credRegion}/${service}/aws4_request`);
    if (!sameHex(expected, signature!)) return mismatch();
    if ('sessionToken' in found) {
      const token = kind === 'presigned' ? str(query!['X-Amz-Security-Token']) : headers['x-amz-security-token'];
      if (token !== found.sessionToken) return { ok: false, status: 400, code: 'InvalidToken', message: 'The provided token is malformed or otherwise invalid.' };
      temporary = found;
    }
    return { ok: true, kind, payloadSha256: /^[0-9a-f]{64}$/.test(payloadHash) ? payloadHash : null, checksums: statedChecksums(headers, query!) };
  }
}

/** `x-amz-checksum-<alg>` in the headers or the query (a pre-signed URL carries it there), and Content-MD5. */
function statedChecksums(headers: Record<string, string>, query: Record<string, string | string[]>): StatedChecksum[] {
  const out: StatedChecksum[] = [];
  for (const [name, value] of [...Object.entries(headers), ...Object.entries(query).map(([k, v]) => [k.toLowerCase(), Array.isArray(v) ? v[0]! : v] as const)]) {
    const m = /^x-amz-checksum-([a-z0-9]+)$/.exec(name);
    if (m && m[1] !== 'type' && m[1] !== 'algorithm' && m[1] !== 'mode') out.push({ algorithm: m[1]!, base64: value });
  }
  if (headers['content-md5']) out.push({ algorithm: 'md5', base64: headers['content-md5'] });
  return out;
}

/** The SDK's own implementations of the checksums Node does not have, by S3's header suffix. */
const SDK_CHECKSUMS: Record<string, () => { update(b: Uint8Array): void; digest(): Promise<Uint8Array> }> = {
  crc32c: () => new Crc32c(),
  crc64nvme: () => new Crc64NvmeJs(),
  xxhash64: () => new Xxh64(),
  xxhash3: () => new Xxh3_64(),
  xxhash128: () => new Xxh3_128(),
};

/**
 * The body's checksum in `algorithm` (S3's header suffix), base64 as S3 states it; null for a name
 * S3 does not know (the request is then refused, never passed unchecked).
 */
export async function checksumOf(algorithm: string, body: Buffer): Promise<string | null> {
  switch (algorithm) {
    case 'crc32': {
      const b = Buffer.alloc(4);
      b.writeUInt32BE(crc32(body) >>> 0);
      return b.toString('base64');
    }
    case 'sha1':
    case 'sha256':
    case 'sha512':
    case 'md5':
      return createHash(algorithm).update(body).digest('base64');
    default: {
      const make = SDK_CHECKSUMS[algorithm];
      if (!make) return null;
      const h = make();
      h.update(body);
      return Buffer.from(await h.digest()).toString('base64');
    }
  }
}

const iso = (d: Date) => d.toISOString().replace(/\.\d{3}Z$/, 'Z');
/** Text escaped for an element of an XML answer (the local S3's and STS's errors). */
export const xmlEscape = (s: string) => s.replace(/[<>&'"]/g, (c) => `&#${c.charCodeAt(0)};`);

/** S3's XML error document. */
export function s3ErrorXml(code: string, message: string, requestId: string, extra: Record<string, string> = {}): string {
  const fields = Object.entries(extra)
    .map(([k, v]) => `<${k}>${xmlEscape(v)}</${k}>`)
    .join('');
  return `<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>${code}</Code><Message>${xmlEscape(message)}</Message>${fields}<RequestId>${requestId}</RequestId><HostId>${randomBytes(24).toString('base64')}</HostId></Error>`;
}

function refuse(req: IncomingMessage, res: ServerResponse, v: Extract<SigV4Verdict, { ok: false }>): void {
  const requestId = randomBytes(8).toString('hex').toUpperCase();
  const body = req.method === 'HEAD' ? '' : s3ErrorXml(v.code, v.message, requestId, v.extra);
  req.resume(); // drain the refused body so the client reads the answer
  res.writeHead(v.status, { 'Content-Type': 'application/xml', 'x-amz-request-id': requestId, 'Content-Length': String(Buffer.byteLength(body)) });
  res.end(body);
}

export interface SigV4FrontOptions {
  /** The emulator behind the front. */
  target: { host: string; port: number };
  host: string;
  port?: number;
  /** The emulator's own credentials, or a lookup that also knows temporary ones (local/sts.ts). */
  credentials: Credentials | CredentialLookup;
  region: string;
  /** s3rver's folder of open multipart uploads (s3rverUploadsDir): multipart calls are then answered as S3 answers them. */
  multipartUploadsDir?: string;
}

export interface SigV4Front {
  endpoint: string;
  port: number;
  server: Server;
  stop(): Promise<void>;
}

function forward(opts: SigV4FrontOptions, req: IncomingMessage, res: ServerResponse, body: Buffer | null): void {
  const upstream = httpRequest(
    { host: opts.target.host, port: opts.target.port, method: req.method, path: req.url, headers: req.headers as IncomingHttpHeaders },
    (up) => {
      res.writeHead(up.statusCode ?? 502, up.headers);
      up.pipe(res);
    },
  );
  upstream.on('error', () => {
    if (!res.headersSent) res.writeHead(503, { 'Content-Type': 'application/xml' });
    res.end(res.headersSent ? undefined : s3ErrorXml('ServiceUnavailable', 'The storage emulator is not reachable.', 'LOCAL'));
  });
  if (body) upstream.end(body);
  else {
    req.pipe(upstream);
    // A client that goes away mid-body ends the call to the emulator too (a pipe would leave it
    // waiting for the rest), so the cut-off upload fails there and stores nothing.
    req.on('close', () => {
      if (!req.complete) upstream.destroy();
    });
  }
}

/** A request's whole body. */
export function readAll(req: IncomingMessage): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => resolve(Buffer.concat(chunks)));
    req.on('error', reject);
  });
}

/** Does the emulator hold an object at this path (`/bucket/key`)? */
function objectExists(opts: SigV4FrontOptions, path: string): Promise<boolean> {
  return new Promise((resolve, reject) => {
    const head = httpRequest({ host: opts.target.host, port: opts.target.port, method: 'HEAD', path }, (up) => {
      up.resume();
      resolve(up.statusCode === 200);
    });
    head.on('error', reject);
    head.end();
  });
}

/** A PutObject (no sub-resource such as `?tagging` or a multipart part) with If-None-Match: its object path. */
function conditionalPut(req: IncomingMessage): string | null {
  if (req.method !== 'PUT' || req.headers['if-none-match'] === undefined) return null;
  const u = new URL(req.url ?? '/', 'http://local');
  const subresource = [...u.searchParams.keys()].some((k) => !k.startsWith('X-Amz-') && k !== 'x-id');
  return subresource ? null : u.pathname;
}

/** Starts the verifying front; its endpoint is the one clients and pre-signed URLs use. */
export async function startSigV4Front(opts: SigV4FrontOptions): Promise<SigV4Front> {
  // Conditional writes in flight, by object path: the next one on a key waits for the last.
  const writing = new Map<string, Promise<void>>();
  const multipart = opts.multipartUploadsDir ? new MultipartUploads(opts.multipartUploadsDir) : null;
  const server = createServer((req, res) => {
    void (async () => {
      if (req.method === 'OPTIONS') return forward(opts, req, res, null); // CORS preflight: unsigned in S3 too
      const verdict = await verifySigV4({ method: req.method ?? 'GET', url: req.url ?? '/', rawHeaders: req.rawHeaders }, opts.credentials, opts.region);
      if (!verdict.ok) return refuse(req, res, verdict);
      if (req.method === 'PUT' && req.headers['content-length'] === undefined && !req.headers['transfer-encoding']?.includes('chunked')) {
        return refuse(req, res, { ok: false, status: 411, code: 'MissingContentLength', message: 'You must provide the Content-Length HTTP header.' });
      }
      const path = conditionalPut(req);
      if (path !== null) {
        if (req.headers['if-none-match'] !== '*') {
          return refuse(req, res, { ok: false, status: 501, code: 'NotImplemented', message: 'A header you provided implies functionality that is not implemented', extra: { Header: 'If-None-Match' } });
        }
        const before = writing.get(path) ?? Promise.resolve();
        let release!: () => void;
        const mine = new Promise<void>((r) => (release = r));
        const chain = before.then(() => mine);
        writing.set(path, chain);
        await before;
        try {
          if (await objectExists(opts, path)) {
            return refuse(req, res, { ok: false, status: 412, code: 'PreconditionFailed', message: 'At least one of the pre-conditions you specified did not hold', extra: { Condition: 'If-None-Match' } });
          }
          const done = new Promise<void>((r) => {
            res.once('finish', r);
            res.once('close', r);
          });
          await pass(verdict);
          await done;
        } finally {
          release();
          if (writing.get(path) === chain) writing.delete(path);
        }
        return;
      }
      return pass(verdict);
    })().catch((err: Error) => {
      if (!res.headersSent) refuse(req, res, { ok: false, status: 500, code: 'InternalError', message: `We encountered an internal error: ${err.message}` });
      else res.destroy();
    });

    /** The body's stated hashes (and a multipart call's parts) checked, then the request goes to the emulator. */
    async function pass(verdict: Extract<SigV4Verdict, { ok: true }>): Promise<void> {
      const mp = multipart ? multipartCall(req.method ?? 'GET', req.url ?? '/') : null;
      if (mp && mp.kind !== 'complete') {
        if (mp.kind === 'abort') {
          if (!(await multipart!.abort(mp))) return refuse(req, res, (await multipart!.check(mp, null))!);
          req.resume();
          return void res.writeHead(204, { 'x-amz-request-id': randomBytes(8).toString('hex').toUpperCase() }).end();
        }
        const refused = await multipart!.check(mp, null);
        if (refused) return refuse(req, res, refused);
      }
      if (verdict.payloadSha256 || verdict.checksums.length || mp?.kind === 'complete') {
        const body = await readAll(req);
        if (verdict.payloadSha256 && createHash('sha256').update(body).digest('hex') !== verdict.payloadSha256) {
          return refuse(req, res, { ok: false, status: 400, code: 'XAmzContentSHA256Mismatch', message: "The provided 'x-amz-content-sha256' header does not match what was computed." });
        }
        for (const c of verdict.checksums) {
          const actual = await checksumOf(c.algorithm, body);
          if (actual === null) {
            return refuse(req, res, { ok: false, status: 400, code: 'InvalidRequest', message: `Value for x-amz-checksum-${c.algorithm} header is invalid.` });
          }
          if (actual !== c.base64) {
            return refuse(req, res, {
              ok: false,
              status: 400,
              code: 'BadDigest',
              message: c.algorithm === 'md5' ? 'The Content-MD5 you specified did not match what we received.' : `The ${c.algorithm.toUpperCase()} you specified did not match the calculated checksum.`,
            });
          }
        }
        if (mp?.kind === 'complete') {
          const refused = await multipart!.check(mp, body);
          if (refused) return refuse(req, res, refused);
        }
        return forward(opts, req, res, body);
      }
      forward(opts, req, res, null);
    }
  });
  await new Promise<void>((ok, fail) => {
    server.once('error', fail);
    server.listen(opts.port ?? 0, opts.host, () => ok());
  });
  const port = (server.address() as AddressInfo).port;
  return {
    endpoint: `http://${opts.host}:${port}`,
    port,
    server,
    stop: () =>
      new Promise<void>((r) => {
        server.close(() => r());
        server.closeAllConnections();
      }),
  };
}
