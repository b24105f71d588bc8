/**
 * A verifying front for the S3 emulator (D61): s3rver accepts whatever it is sent, so without this
 * no local run could see a pre-signed URL that real S3 refuses. Every request is checked as S3
 * checks Signature Version 4 (s3-sigv4.ts) before it reaches the emulator; a refused request never
 * does, so nothing is stored.
 *
 * - The body is held to what the request signed and stated: another SHA-256 than its signed
 *   `x-amz-content-sha256` is 400 `XAmzContentSHA256Mismatch`; a stated checksum
 *   (`x-amz-checksum-<algorithm>` in a header or in the pre-signed query, or Content-MD5) it does
 *   not match is 400 `BadDigest`, as S3 answers; an algorithm S3 does not know is 400. A PUT
 *   without Content-Length (and not chunked) is 411 `MissingContentLength`.
 * - A PutObject with `If-None-Match: *` (the pre-signed upload URLs sign it) is a conditional
 *   write, as in S3: 412 `PreconditionFailed` when the key already holds an object, checked and
 *   written under a per-key lock so two racing writes cannot both land; another If-None-Match value
 *   is 501 `NotImplemented`.
 * - Multipart calls as S3 answers them (s3-multipart.ts): a completion is checked against the
 *   parts stored (order, ETags, 5 MiB minimum of every part but the last), an unknown upload id is
 *   404 `NoSuchUpload`, and AbortMultipartUpload (which s3rver lacks) deletes the parts.
 * - CORS preflights pass unsigned, as in S3.
 * Failures answer S3's XML error shape.
 */
import { createHash, randomBytes } from 'node:crypto';
import { createServer, request as httpRequest, type IncomingHttpHeaders, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { MultipartUploads, multipartCall } from './s3-multipart';
import { checksumOf } from './s3-checksums';
import { verifySigV4, type CredentialLookup, type Credentials, type SigV4Verdict } from './s3-sigv4';

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
      // S3 refuses a DeleteObjects request that states no hash of its body (Content-MD5 or an
      // x-amz-checksum-*): "Missing required header for this request".
      if (req.method === 'POST' && new URL(req.url ?? '/', 'http://s3').searchParams.has('delete') && !verdict.checksums.length) {
        req.resume();
        return refuse(req, res, { ok: false, status: 400, code: 'InvalidRequest', message: 'Missing required header for this request: Content-MD5 OR x-amz-checksum-*' });
      }
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
