/**
 * The local CDN (D60): serves `GET|HEAD /cdn/<object key>?…&Expires=…&Signature=…&Key-Pair-Id=…`,
 * the URL shape that CloudFront serves deployed, and checks it as CloudFront checks a canned-policy
 * signed URL:
 * - `Key-Pair-Id` names the runtime's key (`cdn-key-pair-id`, the trusted key group deployed);
 * - `Signature` is CloudFront's URL-safe base64 (`+`→`-`, `=`→`_`, `/`→`~`) of an RSA-SHA1
 *   signature over the canned policy `{"Statement":[{"Resource":<url>,"Condition":{"DateLessThan":
 *   {"AWS:EpochTime":<Expires>}}}]}`, where `<url>` is the requested URL without the signing
 *   parameters, so another path or another query is another policy and fails;
 * - the request comes before `Expires`.
 * Anything wrong answers 403 in the error envelope; a missing object 404. Otherwise the object is
 * streamed from the S3 emulator with its stored Content-Type and `Content-Disposition: attachment`.
 * The key lives in the data folder (local/secrets.ts), so URLs stay valid across restarts.
 */
import { createPublicKey, createVerify, type KeyObject } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Readable } from 'node:stream';
import { GetObjectCommand, HeadObjectCommand } from '@aws-sdk/client-s3';
import { cannedPolicy, cdnBaseUrl, SIGNING_PARAMS } from '../shared/cdn';
import { config } from '../shared/config';
import { nowEpochSeconds } from '../shared/clock';
import { getSecret } from '../shared/secrets';
import { s3 } from '../shared/storage/s3-client';
import { writeErrorEnvelope, type LocalPage } from './http';

export type CdnVerdict =
  | { ok: true; key: string; disposition: string | null }
  | { ok: false; reason: 'missing_signature' | 'unknown_key' | 'bad_signature' | 'expired' | 'bad_path' };

export interface CdnKeys {
  /** The CDN base URL the signer used (`<runtime url>/cdn`). */
  baseUrl: string;
  keyPairId: string;
  publicKey: KeyObject;
}

/** CloudFront's URL-safe base64 back to standard base64. */
const fromCloudFrontBase64 = (s: string) => s.replace(/-/g, '+').replace(/_/g, '=').replace(/~/g, '/');

/**
 * Checks a request URL (path and query as received) against the canned-policy rules. Pure: the
 * caller passes the key and the current time in epoch seconds.
 */
export function verifyCdnUrl(requestUrl: string, keys: CdnKeys, nowSeconds: number): CdnVerdict {
  const base = new URL(keys.baseUrl);
  const q = requestUrl.indexOf('?');
  const rawPath = q < 0 ? requestUrl : requestUrl.slice(0, q);
  const pairs = q < 0 ? [] : requestUrl.slice(q + 1).split('&').filter(Boolean);
  const signing = new Map<string, string>();
  const kept: string[] = [];
  for (const pair of pairs) {
    const eq = pair.indexOf('=');
    const name = eq < 0 ? pair : pair.slice(0, eq);
    if ((SIGNING_PARAMS as readonly string[]).includes(name)) signing.set(name, safeDecode(eq < 0 ? '' : pair.slice(eq + 1)) ?? '');
    else kept.push(pair);
  }
  const expires = signing.get('Expires');
  const signature = signing.get('Signature');
  const keyPairId = signing.get('Key-Pair-Id');
  // Only canned policies are issued; a custom `Policy` is not accepted by this CDN.
  if (!expires || !signature || !keyPairId || signing.has('Policy') || !/^\d{1,12}$/.test(expires)) return { ok: false, reason: 'missing_signature' };
  if (keyPairId !== keys.keyPairId) return { ok: false, reason: 'unknown_key' };
  const resource = `${base.origin}${rawPath}${kept.length ? `?${kept.join('&')}` : ''}`;
  const algorithm = signing.get('Hash-Algorithm') === 'SHA256' ? 'RSA-SHA256' : 'RSA-SHA1';
  const verifier = createVerify(algorithm).update(cannedPolicy(resource, Number(expires)));
  let valid = false;
  try {
    valid = verifier.verify(keys.publicKey, Buffer.from(fromCloudFrontBase64(signature), 'base64'));
  } catch {
    valid = false;
  }
  if (!valid) return { ok: false, reason: 'bad_signature' };
  if (nowSeconds >= Number(expires)) return { ok: false, reason: 'expired' };
  const prefix = `${base.pathname.replace(/\/+$/, '')}/`;
  const key = rawPath.startsWith(prefix) ? safeDecode(rawPath.slice(prefix.length)) : null;
  if (!key) return { ok: false, reason: 'bad_path' };
  const disposition = kept
    .map((p) => p.split('='))
    .find(([name]) => name === 'response-content-disposition')?.[1];
  return { ok: true, key, disposition: disposition === undefined ? null : safeDecode(disposition) };
}

function safeDecode(s: string): string | null {
  try {
    return decodeURIComponent(s);
  } catch {
    return null;
  }
}

const MESSAGES: Record<Exclude<CdnVerdict, { ok: true }>['reason'], string> = {
  missing_signature: 'This download URL is not signed: it needs Expires, Signature and Key-Pair-Id.',
  unknown_key: 'This download URL was signed with a key this server does not trust.',
  bad_signature: 'This download URL is not valid: its signature does not match its path, query or expiry.',
  expired: 'This download URL has expired. List the files again or call refresh_url for a fresh one.',
  bad_path: 'This download URL does not name an object.',
};

let cachedKeys: { pem: string; id: string; base: string; keys: CdnKeys } | null = null;

async function currentKeys(): Promise<CdnKeys> {
  const pem = await getSecret('cdn-signing-key');
  const id = process.env.CDN_KEY_PAIR_ID ?? '';
  const base = cdnBaseUrl();
  if (cachedKeys?.pem !== pem || cachedKeys.id !== id || cachedKeys.base !== base) {
    cachedKeys = { pem, id, base, keys: { baseUrl: base, keyPairId: id, publicKey: createPublicKey(pem) } };
  }
  return cachedKeys.keys;
}

/** Only `attachment` dispositions are honoured; anything else is served as a plain attachment. */
const dispositionOf = (signed: string | null) => (signed && /^attachment(;|$)/i.test(signed) ? signed : 'attachment');

const isMissing = (err: unknown) => {
  const e = err as { name?: string; $metadata?: { httpStatusCode?: number } };
  return e.name === 'NoSuchKey' || e.name === 'NotFound' || e.$metadata?.httpStatusCode === 404;
};

/** The `/cdn/…` page of the local HTTP server. */
export const localCdnPage: LocalPage = async (req: IncomingMessage, res: ServerResponse) => {
  const url = req.url ?? '/';
  let basePath: string;
  try {
    basePath = new URL(cdnBaseUrl()).pathname.replace(/\/+$/, '');
  } catch {
    return false; // no CDN configured: not ours
  }
  if (!url.startsWith(`${basePath}/`)) return false;
  req.resume(); // a GET has no body; never leave one unread
  if (req.method !== 'GET' && req.method !== 'HEAD') {
    writeErrorEnvelope(res, 405, 'invalid_request', `Download URLs answer GET and HEAD, not ${req.method}.`, { Allow: 'GET, HEAD' });
    return true;
  }
  const verdict = verifyCdnUrl(url, await currentKeys(), nowEpochSeconds());
  if (!verdict.ok) {
    writeErrorEnvelope(res, 403, 'authorization_error', MESSAGES[verdict.reason]);
    return true;
  }
  const Bucket = config().bucketName;
  try {
    if (req.method === 'HEAD') {
      const head = await s3().send(new HeadObjectCommand({ Bucket, Key: verdict.key }));
      res.writeHead(200, objectHeaders(head, verdict.disposition));
      res.end();
      return true;
    }
    const range = typeof req.headers.range === 'string' ? req.headers.range : undefined;
    const out = await s3().send(new GetObjectCommand({ Bucket, Key: verdict.key, Range: range }));
    res.writeHead(out.ContentRange ? 206 : 200, {
      ...objectHeaders(out, verdict.disposition),
      ...(out.ContentRange ? { 'Content-Range': out.ContentRange } : {}),
    });
    const body = out.Body as Readable;
    body.on('error', () => res.destroy());
    body.pipe(res);
  } catch (err) {
    if (isMissing(err)) writeErrorEnvelope(res, 404, 'not_found', 'No such file: it was withdrawn or never stored.');
    else if ((err as { $metadata?: { httpStatusCode?: number } }).$metadata?.httpStatusCode === 416) writeErrorEnvelope(res, 416, 'invalid_request', 'The requested range is not satisfiable.');
    else throw err;
  }
  return true;
};

function objectHeaders(o: { ContentType?: string; ContentLength?: number; ETag?: string; LastModified?: Date }, disposition: string | null): Record<string, string> {
  return {
    'Content-Type': o.ContentType ?? 'application/octet-stream',
    'Content-Disposition': dispositionOf(disposition),
    'X-Content-Type-Options': 'nosniff',
    'Accept-Ranges': 'bytes',
    'Cache-Control': 'private, max-age=3600',
    ...(o.ContentLength !== undefined ? { 'Content-Length': String(o.ContentLength) } : {}),
    ...(o.ETag ? { ETag: o.ETag } : {}),
    ...(o.LastModified ? { 'Last-Modified': o.LastModified.toUTCString() } : {}),
  };
}
