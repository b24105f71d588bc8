/**
 * Verifying a delivery. The service signs every delivery twice:
 * - `X-Service-Signature`: hex HMAC-SHA256 of the raw body, keyed by the whole `whsec_…` string
 *   (`X-Service-Signature-Previous` with the previous secret for 24 hours after a rotation);
 * - Standard Webhooks: `webhook-id`, `webhook-timestamp` (Unix seconds) and `webhook-signature`
 *   (`v1,<base64 HMAC-SHA256 of "id.timestamp.body">`, keyed by the base64 bytes after `whsec_`;
 *   space-separated entries, one per valid secret).
 * Verify against the raw bytes as received, before parsing.
 */
import { createHmac, timingSafeEqual } from 'node:crypto';

export type SignatureScheme = 'service' | 'standard';

export interface VerifyOptions {
  /** The endpoint's `whsec_…` secret (during a rotation, pass both: either may match). */
  secret: string | string[];
  /**
   * Which scheme must match. Default `standard` (its signed timestamp stops a replayed delivery).
   * `any`: the Standard Webhooks signature when its headers are there, else `X-Service-Signature`
   * (which has no timestamp, so a captured delivery can be replayed: only for receivers that
   * cannot read the `webhook-*` headers).
   */
  scheme?: SignatureScheme | 'any';
  /** Standard Webhooks: the largest accepted clock difference; default 300 s. */
  toleranceSeconds?: number;
  /** For tests: the current time. */
  now?: Date;
}

export class WebhookVerificationError extends Error {
  override name = 'WebhookVerificationError';
}

export interface WebhookEvent {
  id: string;
  object: 'event';
  type: string;
  api_version: string;
  created_at: string;
  environment: 'live' | 'test';
  data: Record<string, unknown>;
}

function equal(a: string, b: string): boolean {
  const x = Buffer.from(a);
  const y = Buffer.from(b);
  return x.length === y.length && timingSafeEqual(x, y);
}

function header(headers: Record<string, string | string[] | undefined>, name: string): string | undefined {
  const key = Object.keys(headers).find((k) => k.toLowerCase() === name);
  const v = key === undefined ? undefined : headers[key];
  return Array.isArray(v) ? v[0] : v;
}

export function verifyServiceSignature(rawBody: string | Buffer, headers: Record<string, string | string[] | undefined>, secrets: string[]): boolean {
  const sigs = [header(headers, 'x-service-signature'), header(headers, 'x-service-signature-previous')].filter((s): s is string => !!s);
  return secrets.some((secret) => {
    const expected = createHmac('sha256', secret).update(rawBody).digest('hex');
    return sigs.some((s) => equal(s, expected));
  });
}

export function verifyStandardSignature(
  rawBody: string | Buffer,
  headers: Record<string, string | string[] | undefined>,
  secrets: string[],
  toleranceSeconds = 300,
  now = new Date(),
): boolean {
  const id = header(headers, 'webhook-id');
  const ts = header(headers, 'webhook-timestamp');
  const sig = header(headers, 'webhook-signature');
  if (!id || !ts || !sig) return false;
  if (!/^\d+$/.test(ts) || Math.abs(now.getTime() / 1000 - Number(ts)) > toleranceSeconds) return false;
  const given = sig.split(' ').filter((s) => s.startsWith('v1,'));
  return secrets.some((secret) => {
    const key = Buffer.from(secret.startsWith('whsec_') ? secret.slice(6) : secret, 'base64');
    const expected = `v1,${createHmac('sha256', key).update(`${id}.${ts}.`).update(rawBody).digest('base64')}`;
    return given.some((g) => equal(g, expected));
  });
}

/** Verifies a delivery and returns the parsed event; throws WebhookVerificationError otherwise. */
export function verifyWebhook(rawBody: string | Buffer, headers: Record<string, string | string[] | undefined>, opts: VerifyOptions): WebhookEvent {
  const secrets = Array.isArray(opts.secret) ? opts.secret : [opts.secret];
  const scheme = opts.scheme ?? 'standard';
  const hasStandard = ['webhook-id', 'webhook-timestamp', 'webhook-signature'].some((h) => header(headers, h) !== undefined);
  // With `any`, the timestamped scheme decides whenever the delivery carries it (no fallback around a stale timestamp).
  const service = (scheme === 'service' || (scheme === 'any' && !hasStandard)) && verifyServiceSignature(rawBody, headers, secrets);
  const standard = scheme !== 'service' && verifyStandardSignature(rawBody, headers, secrets, opts.toleranceSeconds, opts.now);
  if (!service && !standard) throw new WebhookVerificationError(`no valid ${scheme === 'any' ? '' : `${scheme} `}signature for this body and secret`);
  try {
    return JSON.parse(Buffer.isBuffer(rawBody) ? rawBody.toString('utf8') : rawBody) as WebhookEvent;
  } catch {
    throw new WebhookVerificationError('the body is not JSON');
  }
}
