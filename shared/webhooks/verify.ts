/**
 * The integrator kit's verifier (docs/webhooks.md): `verifyWebhook(rawBody, headers, secret)`.
 * Dependency-free (node:crypto only) so it can be copied into a receiver as it is.
 *
 * It accepts a delivery when either
 * - the Standard Webhooks signature (`webhook-id`, `webhook-timestamp`, `webhook-signature`)
 *   matches and the timestamp is within `toleranceSeconds` (default 5 minutes) of now, or
 * - only when `allowLegacy` is set: `X-Service-Signature` (hex HMAC-SHA256 of the raw body keyed by
 *   the whole secret string) matches. That header carries no timestamp, so it does not protect
 *   against replays; prefer the Standard Webhooks headers.
 * During the 24 h after a rotation, deliveries carry signatures by both secrets, so a receiver
 * holding either secret verifies (D37).
 */
import { createHmac, timingSafeEqual } from 'node:crypto';

export type WebhookHeaders = Record<string, string | string[] | undefined> | Headers;

export interface VerifyOptions {
  toleranceSeconds?: number;
  /** Also accept the timestamp-less `X-Service-Signature` alone. Default false. */
  allowLegacy?: boolean;
  /** For tests: the current time. */
  now?: Date;
}

export interface VerifiedWebhook<T = unknown> {
  /** The event id (`evt_…`): deduplicate on it. */
  id: string;
  timestamp: Date | null;
  event: T;
}

export class WebhookVerificationError extends Error {
  override name = 'WebhookVerificationError';
}

function header(headers: WebhookHeaders, name: string): string | undefined {
  if (typeof (headers as Headers).get === 'function') return (headers as Headers).get(name) ?? undefined;
  const h = headers as Record<string, string | string[] | undefined>;
  const key = Object.keys(h).find((k) => k.toLowerCase() === name);
  const v = key === undefined ? undefined : h[key];
  return Array.isArray(v) ? v[0] : v;
}

function safeEqual(a: string, b: string): boolean {
  const x = Buffer.from(a);
  const y = Buffer.from(b);
  return x.length === y.length && timingSafeEqual(x, y);
}

/** Standard Webhooks signing key: the bytes of the base64 part after `whsec_`. */
function signingKey(secret: string): Buffer {
  return Buffer.from(secret.startsWith('whsec_') ? secret.slice(6) : secret, 'base64');
}

export function verifyWebhook<T = unknown>(
  rawBody: string | Buffer,
  headers: WebhookHeaders,
  secret: string,
  opts: VerifyOptions = {},
): VerifiedWebhook<T> {
  if (typeof rawBody !== 'string' && !Buffer.isBuffer(rawBody)) {
    throw new WebhookVerificationError('rawBody must be the raw request body (string or Buffer), not a parsed object');
  }
  const body = Buffer.isBuffer(rawBody) ? rawBody : Buffer.from(rawBody, 'utf8');
  const id = header(headers, 'webhook-id');
  const ts = header(headers, 'webhook-timestamp');
  const sigs = header(headers, 'webhook-signature');
  let ok = false;
  let timestamp: Date | null = null;

  if (id && ts && sigs) {
    const seconds = Number(ts);
    if (!/^\d+$/.test(ts)) throw new WebhookVerificationError('invalid webhook-timestamp');
    const nowS = Math.floor((opts.now ?? new Date()).getTime() / 1000);
    if (Math.abs(nowS - seconds) > (opts.toleranceSeconds ?? 300)) throw new WebhookVerificationError('webhook-timestamp outside the tolerance');
    const expected = createHmac('sha256', signingKey(secret))
      .update(`${id}.${ts}.`)
      .update(body)
      .digest('base64');
    ok = sigs.split(' ').some((entry) => {
      const [version, sig] = entry.split(',');
      return version === 'v1' && sig !== undefined && safeEqual(sig, expected);
    });
    timestamp = new Date(seconds * 1000);
  } else if (opts.allowLegacy) {
    const expected = createHmac('sha256', secret).update(body).digest('hex');
    const candidates = [header(headers, 'x-service-signature'), header(headers, 'x-service-signature-previous')];
    ok = candidates.some((c) => c !== undefined && safeEqual(c.toLowerCase(), expected));
  } else {
    throw new WebhookVerificationError('missing webhook-id, webhook-timestamp or webhook-signature header');
  }
  if (!ok) throw new WebhookVerificationError('no matching signature');
  const event = JSON.parse(body.toString('utf8')) as T & { id?: string };
  return { id: id ?? String(event.id), timestamp, event };
}
