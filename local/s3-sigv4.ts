/**
 * Signature Version 4 verification as S3 does it (D61), for the S3 emulator's verifying front
 * (s3-front.ts) and the STS emulator (sts.ts): a request as it arrived is checked, and the verdict
 * is either the error S3 would answer or what the body must still match.
 *
 * - Pre-signed URLs (`X-Amz-Algorithm`, `X-Amz-Credential`, `X-Amz-Date`, `X-Amz-Expires`,
 *   `X-Amz-SignedHeaders`, `X-Amz-Signature` in the query): the canonical request is rebuilt from
 *   the request as received, so a signed header (Content-Type, Content-Length, Host) with another
 *   value, another path or query, or a tampered signature is 403 `SignatureDoesNotMatch`; a request
 *   after `X-Amz-Date + X-Amz-Expires` is 403 `AccessDenied` "Request has expired"; an `x-amz-*`
 *   header the URL did not sign (an ACL, metadata, a storage class) is 403 `AccessDenied`.
 * - `Authorization: AWS4-HMAC-SHA256 …` (the SDK's own calls): the same check, and a clock skew
 *   above 15 minutes refused (`RequestTimeTooSkewed`). An `x-amz-content-sha256` payload hash is
 *   handed back in the verdict for the body to be held to; an aws-chunked (`STREAMING-…`) body is
 *   refused (501), never passed unchecked.
 * - Temporary credentials (an assumed role's, sts.ts) need their session token and are refused
 *   once expired (400 `ExpiredToken`).
 * - A stated body checksum (`x-amz-checksum-<algorithm>` in a header or in the pre-signed query,
 *   or Content-MD5) is handed back in the verdict; checksumOf (s3-checksums.ts) computes a body's
 *   checksum in any algorithm S3 knows (crc32, crc32c, crc64nvme, sha1, sha256, sha512, md5,
 *   xxhash64, xxhash3, xxhash128) and null for one it does not.
 * - Anything else (anonymous) is 403 `AccessDenied`, as for a private bucket.
 *
 * The canonical request, string to sign and signing key are those of `@smithy/signature-v4`, the
 * SDK's own signer (s3-sigv4-signature.ts); only the parsing of what arrived and the checks around
 * the signature are done here.
 */
import type { HttpRequest } from '@smithy/types';
import { now } from '../shared/clock';
import { statedChecksums, type StatedChecksum } from './s3-checksums';
import { ALGORITHM, parseAmzDate, sameHex, Verifier, type Credentials } from './s3-sigv4-signature';

export type { Credentials } from './s3-sigv4-signature';
export type { StatedChecksum } from './s3-checksums';

const UNSIGNED_PAYLOAD = 'UNSIGNED-PAYLOAD';
const MAX_SKEW_MS = 15 * 60 * 1000;
const MAX_PRESIGNED_EXPIRES = 7 * 24 * 3600;

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

export type SigV4Verdict =
  | {
      ok: true;
      kind: 'presigned' | 'header';
      /** hex SHA-256 the body must have, when the request signed one */
      payloadSha256: string | null;
      checksums: StatedChecksum[];
    }
  | { ok: false; status: number; code: string; message: string; extra?: Record<string, string> };

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

const iso = (d: Date) => d.toISOString().replace(/\.\d{3}Z$/, 'Z');
