/**
 * The client verifies both signature schemes the service sends (the service's own signer and
 * an independent Standard Webhooks implementation produce what it accepts).
 */
import { Webhook } from 'standardwebhooks';
import { verifyWebhook, WebhookVerificationError } from '../../packages/client/src';
import { signedHeaders } from '../../shared/webhooks/signing';

const secret = `whsec_${Buffer.from('0123456789abcdef0123456789abcdef').toString('base64')}`;
const body = JSON.stringify({ id: 'evt_1', object: 'event', type: 'job.completed', api_version: '2026-03-18', created_at: '2026-11-23T00:00:00.000Z', environment: 'test', data: { job_id: 'job_1' } });

test('a delivery signed by the service verifies with either scheme', () => {
  const h = signedHeaders('evt_1', body, secret, null, new Date());
  expect(verifyWebhook(body, h, { secret, scheme: 'service' }).type).toBe('job.completed');
  expect(verifyWebhook(body, h, { secret, scheme: 'standard' }).id).toBe('evt_1');
});

test('the Standard Webhooks reference library signs what the client accepts', () => {
  const at = new Date();
  const sig = new Webhook(secret).sign('evt_1', at, body);
  const h = { 'webhook-id': 'evt_1', 'webhook-timestamp': String(Math.floor(at.getTime() / 1000)), 'webhook-signature': sig };
  expect(verifyWebhook(body, h, { secret, scheme: 'standard' }).id).toBe('evt_1');
});

test('after a rotation, the previous secret still verifies (both schemes)', () => {
  const next = `whsec_${Buffer.from('fedcba9876543210fedcba9876543210').toString('base64')}`;
  const h = signedHeaders('evt_1', body, next, secret, new Date());
  expect(() => verifyWebhook(body, h, { secret, scheme: 'service' })).not.toThrow();
  expect(() => verifyWebhook(body, h, { secret, scheme: 'standard' })).not.toThrow();
});

test('a tampered body, another secret or a stale timestamp is refused', () => {
  const h = signedHeaders('evt_1', body, secret, null, new Date());
  expect(() => verifyWebhook(body.replace('job_1', 'job_2'), h, { secret })).toThrow(WebhookVerificationError);
  expect(() => verifyWebhook(body, h, { secret: `whsec_${Buffer.from('x'.repeat(32)).toString('base64')}` })).toThrow(WebhookVerificationError);
  const old = signedHeaders('evt_1', body, secret, null, new Date(Date.now() - 3_600_000));
  expect(() => verifyWebhook(body, old, { secret, scheme: 'standard' })).toThrow(WebhookVerificationError);
});

test('by default a replayed delivery with a stale timestamp is refused, though its untimed X-Service-Signature still matches', () => {
  const old = signedHeaders('evt_1', body, secret, null, new Date(Date.now() - 3_600_000));
  expect(() => verifyWebhook(body, old, { secret })).toThrow(WebhookVerificationError);
  // `any` takes the untimed header only when the delivery carries no Standard Webhooks headers.
  expect(() => verifyWebhook(body, old, { secret, scheme: 'any' })).toThrow(WebhookVerificationError);
  const serviceOnly = Object.fromEntries(Object.entries(old).filter(([k]) => !k.toLowerCase().startsWith('webhook-')));
  expect(verifyWebhook(body, serviceOnly, { secret, scheme: 'any' }).id).toBe('evt_1');
});
