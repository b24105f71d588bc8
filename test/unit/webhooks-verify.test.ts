/** The integrator kit's verifyWebhook (D37), checked against the headers the dispatcher signs. */
import { Webhook } from 'standardwebhooks';
import { verifyWebhook, WebhookVerificationError } from '../../shared/webhooks/verify';
import { signedHeaders, legacySignature } from '../../shared/webhooks/signing';
import { newWebhookSecret } from '../../shared/webhooks/secrets';
import { randomBytes } from 'node:crypto';

const at = new Date('2026-11-21T12:00:00.000Z');
const body = JSON.stringify({ id: 'evt_01JD0000000000000000000000', object: 'event', type: 'job.completed', data: { job_id: 'job_x' } });
const id = 'evt_01JD0000000000000000000000';

describe('verifyWebhook (D37)', () => {
  const secret = newWebhookSecret();

  it('D36: secrets are whsec_ + base64 of 32 random bytes', () => {
    expect(secret).toMatch(/^whsec_[A-Za-z0-9+/]{43}=$/);
    expect(Buffer.from(secret.slice(6), 'base64')).toHaveLength(32);
  });

  it('D37: accepts a delivery signed by the dispatcher and returns the event id for deduplication', () => {
    const headers = signedHeaders(id, body, secret, null, at);
    const v = verifyWebhook<{ type: string }>(body, headers, secret, { now: at });
    expect(v.id).toBe(id);
    expect(v.event.type).toBe('job.completed');
  });

  it('D37: X-Service-Signature is the hex HMAC-SHA256 of the raw body keyed by the whole secret string', () => {
    const headers = signedHeaders(id, body, secret, null, at);
    const { createHmac } = require('node:crypto') as typeof import('node:crypto');
    expect(headers['x-service-signature']).toBe(createHmac('sha256', secret).update(body).digest('hex'));
  });

  it('D37: the standardwebhooks library verifies what we sign', () => {
    const headers = signedHeaders(id, body, secret, null, new Date());
    expect(new Webhook(secret).verify(body, headers)).toEqual(JSON.parse(body));
  });

  it('D37: verifyWebhook accepts what the standardwebhooks library signs', () => {
    const wh = new Webhook(secret);
    const sig = wh.sign(id, at, body);
    expect(verifyWebhook(body, { 'webhook-id': id, 'webhook-timestamp': String(at.getTime() / 1000), 'webhook-signature': sig }, secret, { now: at }).id).toBe(id);
  });

  it('D37: during a rotation either secret verifies (two v1 entries, X-Service-Signature-Previous)', () => {
    const next = newWebhookSecret();
    const headers = signedHeaders(id, body, next, secret, new Date());
    expect(headers['webhook-signature']!.split(' ')).toHaveLength(2);
    expect(() => verifyWebhook(body, headers, secret)).not.toThrow();
    expect(() => verifyWebhook(body, headers, next)).not.toThrow();
    expect(() => new Webhook(secret).verify(body, headers)).not.toThrow();
    expect(() => new Webhook(next).verify(body, headers)).not.toThrow();
    expect(headers['x-service-signature-previous']).toBe(legacySignature(body, secret));
  });

  it('refuses a modified body, a wrong secret, and a stale timestamp', () => {
    const headers = signedHeaders(id, body, secret, null, at);
    expect(() => verifyWebhook(body.replace('job_x', 'job_y'), headers, secret, { now: at })).toThrow(WebhookVerificationError);
    expect(() => verifyWebhook(body, headers, newWebhookSecret(), { now: at })).toThrow(WebhookVerificationError);
    expect(() => verifyWebhook(body, headers, secret, { now: new Date(at.getTime() + 301_000) })).toThrow(/tolerance/);
  });

  it('refuses a parsed object instead of the raw body (the API Gateway pitfall)', () => {
    const headers = signedHeaders(id, body, secret, null, at);
    expect(() => verifyWebhook(JSON.parse(body) as unknown as string, headers, secret, { now: at })).toThrow(/raw request body/);
  });

  it('accepts X-Service-Signature alone only when allowLegacy is set', () => {
    const headers = { 'X-Service-Signature': legacySignature(body, secret) };
    expect(() => verifyWebhook(body, headers, secret)).toThrow(WebhookVerificationError);
    expect(verifyWebhook(Buffer.from(body), headers, secret, { allowLegacy: true }).id).toBe(id);
  });

  it('reads headers from a fetch Headers object too', () => {
    const headers = new Headers(signedHeaders(id, body, secret, null, at));
    expect(verifyWebhook(body, headers, secret, { now: at }).id).toBe(id);
  });
});
