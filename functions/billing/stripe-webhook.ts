/**
 * POST /v1/billing/stripe/webhook (D62): Stripe's confirmation of a credit purchase.
 *
 * No API key: the request is authenticated by its `Stripe-Signature` over the raw body (a bad or
 * missing signature is 400 and changes nothing). `checkout.session.completed` with the payment made,
 * or `checkout.session.async_payment_succeeded` for a payment that settled later, applies the
 * purchase of one of our checkout sessions exactly once, whatever Stripe redelivers;
 * `checkout.session.async_payment_failed` fails the session (nothing granted). Other events are
 * acknowledged and ignored. A failure to apply answers 500, so Stripe retries.
 */
import middy from '@middy/core';
import type { APIGatewayProxyEvent, APIGatewayProxyResult } from 'aws-lambda';
import { envelope } from '../../shared/http/middlewares/envelope';
import { state } from '../../shared/http/state';
import { routeById } from '../../shared/manifest/routes';
import { errors } from '../../shared/errors';
import { logger } from '../../shared/logger';
import { paymentProvider } from '../../shared/billing/provider';
import { confirmCheckout, failCheckout } from '../../shared/billing/confirm-checkout';
import { StripeSignatureError, type StripeProvider } from '../../shared/payments/stripe';

const def = routeById('billing.stripe_webhook');

async function receive(event: APIGatewayProxyEvent): Promise<APIGatewayProxyResult> {
  const s = state(event);
  const provider = paymentProvider();
  if (provider.name !== 'stripe') throw errors.notFound('route', `${def.method} ${def.path} (payments by Stripe are not enabled here)`);
  let outcome;
  try {
    // The raw body as received (API Gateway passes JSON bodies as text, unchanged).
    outcome = await (provider as StripeProvider).readWebhook(s.rawBodyText ?? '', s.headers['stripe-signature']);
  } catch (e) {
    if (e instanceof StripeSignatureError) {
      throw errors.invalidRequest('The Stripe-Signature header does not match the body: the event was not accepted.', [
        { field: 'Stripe-Signature', message: 'signature verification failed', code: 'invalid_signature' },
      ]);
    }
    throw e;
  }
  if (outcome.kind === 'ignored') {
    logger.info('stripe event ignored', { event_id: outcome.eventId, type: outcome.type, why: outcome.why });
    return { body: { received: true, outcome: 'ignored' } } as unknown as APIGatewayProxyResult;
  }
  if (outcome.kind === 'checkout_failed') {
    const f = await failCheckout(outcome.sessionId, { providerRef: outcome.providerRef, reason: outcome.reason, eventId: outcome.eventId });
    logger.info('stripe checkout payment failed', { event_id: outcome.eventId, checkout_session_id: outcome.sessionId, outcome: f.outcome });
    return { body: { received: true, outcome: f.outcome } } as unknown as APIGatewayProxyResult;
  }
  const r = await confirmCheckout(outcome.sessionId, {
    paymentMethod: outcome.paymentMethod,
    providerRef: outcome.providerRef,
    eventId: outcome.eventId,
    alreadyCharged: true,
  });
  logger.info('stripe checkout completed', { event_id: outcome.eventId, checkout_session_id: outcome.sessionId, outcome: r.outcome });
  return { body: { received: true, outcome: r.outcome } } as unknown as APIGatewayProxyResult;
}

export const handler = middy<APIGatewayProxyEvent, APIGatewayProxyResult>(receive, { timeoutEarlyInMillis: 0 }).use(envelope(def));
