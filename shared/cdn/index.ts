/**
 * Download URLs (D60): every URL that hands out stored bytes (files, keyframes, exports) comes from
 * `signDownloadUrl`, a CDN signed URL with a canned policy that stays valid for the full 7 days it
 * promises, whatever signed it (no temporary credentials involved).
 *
 * Deployed: CloudFront in front of the media bucket (Origin Access Control, a trusted key group);
 * `CDN_BASE_URL` is the distribution's URL, `CDN_KEY_PAIR_ID` the public key id, and the RSA
 * private key is the `cdn-signing-key` secret, read at run time (functions declare
 * `access.cdnSign`). Locally the runtime serves the same URL shape under `<runtime url>/cdn` and
 * checks it the same way (local/cdn.ts).
 *
 * URL: `<base>/<object key>?response-content-disposition=attachment…&Expires=<unix s>&Key-Pair-Id=…&Signature=…`.
 * The disposition parameter is part of the signed resource, so nobody can change it; the origin
 * answers with it (S3 honours `response-content-disposition` on authenticated requests, which
 * OAC requests are). `Expires` equals `download_url_expires_at`.
 */
import { getSignedUrl } from '@aws-sdk/cloudfront-signer';
import { now } from '../clock';
import { getSecret } from '../secrets';

/** D30/D60: download URLs are valid 7 days. */
export const DOWNLOAD_URL_TTL_SECONDS = 7 * 24 * 3600;

export interface SignedUrl {
  url: string;
  expires_at: string;
}

export interface DownloadUrlOptions {
  /** The name the browser saves the file under (the worker's original file name). */
  filename?: string | null;
  /**
   * When the object's bytes may be deleted (a lifecycle rule): the URL expires then at the latest,
   * so no link outlives what it points to (D60). Defaults to 7 days from now.
   */
  notAfter?: Date;
}

export class CdnNotConfiguredError extends Error {
  override name = 'CdnNotConfiguredError';
}

/** The CDN's base URL, without a trailing slash; a bare domain gets https://. */
export function cdnBaseUrl(): string {
  const raw = process.env.CDN_BASE_URL?.trim();
  if (!raw) throw new CdnNotConfiguredError('CDN_BASE_URL is not set (the function must declare access.cdnSign)');
  return (/^https?:\/\//.test(raw) ? raw : `https://${raw}`).replace(/\/+$/, '');
}

function keyPairId(): string {
  const id = process.env.CDN_KEY_PAIR_ID?.trim();
  if (!id) throw new CdnNotConfiguredError('CDN_KEY_PAIR_ID is not set (the function must declare access.cdnSign)');
  return id;
}

/** Each key segment percent-encoded (keys of this app are URL-safe already; this keeps it so). */
export function encodeObjectKey(key: string): string {
  return key.split('/').map(encodeURIComponent).join('/');
}

/** `attachment; filename="…"` (ASCII fallback) plus RFC 6266 `filename*` for any other name. */
export function attachmentDisposition(filename?: string | null): string {
  if (!filename) return 'attachment';
  const ascii = filename.replace(/[^\x20-\x7e]/g, '_').replace(/["\\]/g, '_');
  const utf8 = encodeURIComponent(filename).replace(/['()*]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`);
  return ascii === filename ? `attachment; filename="${ascii}"` : `attachment; filename="${ascii}"; filename*=UTF-8''${utf8}`;
}

/** Query parameters CloudFront reads for the signature; everything else is part of the resource. */
export const SIGNING_PARAMS = ['Expires', 'Signature', 'Key-Pair-Id', 'Policy', 'Hash-Algorithm'] as const;

/**
 * The canned policy CloudFront checks a signed URL against: the exact resource URL and the expiry,
 * serialised without whitespace (the form `@aws-sdk/cloudfront-signer` signs).
 */
export function cannedPolicy(resource: string, expiresEpochSeconds: number): string {
  return JSON.stringify({ Statement: [{ Resource: resource, Condition: { DateLessThan: { 'AWS:EpochTime': expiresEpochSeconds } } }] });
}

/** A signed download URL for one object of the media bucket, valid 7 days from now. */
export async function signDownloadUrl(key: string, opts: DownloadUrlOptions = {}): Promise<SignedUrl> {
  // Whole seconds, so `download_url_expires_at` is exactly the URL's `Expires`.
  const full = Math.floor(now().getTime() / 1000) + DOWNLOAD_URL_TTL_SECONDS;
  const expiresSeconds = opts.notAfter ? Math.min(full, Math.floor(opts.notAfter.getTime() / 1000)) : full;
  const resource = `${cdnBaseUrl()}/${encodeObjectKey(key)}?response-content-disposition=${encodeURIComponent(attachmentDisposition(opts.filename))}`;
  const url = getSignedUrl({
    url: resource,
    keyPairId: keyPairId(),
    privateKey: await getSecret('cdn-signing-key'),
    dateLessThan: new Date(expiresSeconds * 1000).toISOString(),
  });
  return { url, expires_at: new Date(expiresSeconds * 1000).toISOString() };
}
