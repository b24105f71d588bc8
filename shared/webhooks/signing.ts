/**
 * Delivery headers (D37, D48): computed at send time, for every attempt (replays included), with a
 * fresh timestamp.
 * - `X-Service-Signature`: hex HMAC-SHA256 of the raw body keyed by the whole secret string.
 * - `X-Service-Signature-Previous`: the same with the previous secret, during the 24 h after a
 *   rotation.
 * - Standard Webhooks: `webhook-id` (the evt id), `webhook-timestamp` (Unix seconds),
 *   `webhook-signature` = `v1,<base64 HMAC-SHA256 of "id.timestamp.body">` keyed by the base64-decoded
 *   part of the secret after `whsec_`; one entry per valid secret, space-separated.
 */
import { createHmac } from 'node:crypto';

export function legacySignature(body: string, secret: string): string {
  return createHmac('sha256', secret).update(body).digest('hex');
}

export function standardSignature(id: string, timestampSeconds: number, body: string, secret: string): string {
  const key = Buffer.from(secret.startsWith('whsec_') ? secret.slice(6) : secret, 'base64');
  return `v1,${createHmac('sha256', key).update(`${id}.${timestampSeconds}.${body}`).digest('base64')}`;
}

export function signedHeaders(
  eventId: string,
  body: string,
  secret: string,
  previousSecret: string | null,
  at: Date,
): Record<string, string> {
  const ts = Math.floor(at.getTime() / 1000);
  const sigs = [standardSignature(eventId, ts, body, secret)];
  const headers: Record<string, string> = {
    'content-type': 'application/json',
    'user-agent': 'MediaMarketplace-Webhooks/1.0',
    'webhook-id': eventId,
    'webhook-timestamp': String(ts),
    'x-service-signature': legacySignature(body, secret),
  };
  if (previousSecret) {
    sigs.push(standardSignature(eventId, ts, body, previousSecret));
    headers['x-service-signature-previous'] = legacySignature(body, previousSecret);
  }
  headers['webhook-signature'] = sigs.join(' ');
  return headers;
}
