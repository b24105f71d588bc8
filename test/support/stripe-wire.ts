/**
 * A small Stripe API on loopback that answers the endpoints our Stripe adapter calls, in Stripe's
 * published wire format (form-encoded requests, JSON objects and error bodies), so the adapter is
 * tested through the official SDK (which accepts host, port and protocol). It records requests.
 *
 * - POST /v1/customers, POST /v1/checkout/sessions (hosted `url`), GET /v1/payment_intents/:id
 * - POST /v1/payment_intents: a payment method listed in `declining` answers 402 `card_error`
 *   (`card_declined` / `insufficient_funds`), as Stripe does for an off-session decline; one listed
 *   in `processing` answers a PaymentIntent in status `processing` (accepted, not settled yet).
 *   Every PaymentIntent created is kept in `intents`; GET answers its present state, so a test
 *   settles a processing one by changing its status there.
 * - GET /v1/payment_intents/search: `metadata['checkout_session_id']:'<id>'` queries, answered from
 *   `intents` (those created here keep their metadata) as a `search_result` list.
 * - `payment_method_types` on a Checkout Session or PaymentIntent creation answers 400
 *   `payment_method_types_no_longer_supported`, as the API version the SDK pins (2026-09-30.endive
 *   and later) does; `allowed_payment_method_types` is the parameter there.
 */
import { randomBytes } from 'node:crypto';
import { createServer, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface StripeRequest {
  method: string;
  path: string;
  form: Record<string, string>;
  idempotencyKey: string | undefined;
  authorization: string | undefined;
}

export interface FakeIntent {
  status: string;
  payment_method: string | null;
  amount: number;
  last_payment_error: { type: string; code: string; decline_code?: string; message: string } | null;
  metadata?: Record<string, string>;
}

export interface FakeStripe {
  host: string;
  port: number;
  requests: StripeRequest[];
  /** The payment method the PaymentIntent of a completed checkout used (retrieve answers it). */
  paymentMethodOf: Map<string, string>;
  declining: Set<string>;
  /** Payment methods whose off-session PaymentIntents are created `processing`. */
  processing: Set<string>;
  /** The PaymentIntents created here, by id, as GET answers them. */
  intents: Map<string, FakeIntent>;
  close(): Promise<void>;
}

const id = (prefix: string) => `${prefix}_${randomBytes(8).toString('hex')}`;

export async function startFakeStripe(): Promise<FakeStripe> {
  const requests: StripeRequest[] = [];
  const paymentMethodOf = new Map<string, string>();
  const declining = new Set<string>();
  const processing = new Set<string>();
  const intents = new Map<string, FakeIntent>();
  const send = (res: ServerResponse, status: number, body: unknown) => {
    const text = JSON.stringify(body);
    res.writeHead(status, { 'Content-Type': 'application/json', 'Request-Id': id('req') });
    res.end(text);
  };

  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const url = new URL(req.url ?? '/', 'http://stripe.local');
      const form = Object.fromEntries(new URLSearchParams(Buffer.concat(chunks).toString('utf8')));
      const r: StripeRequest = {
        method: req.method ?? '',
        path: url.pathname,
        form,
        idempotencyKey: req.headers['idempotency-key'] as string | undefined,
        authorization: req.headers.authorization,
      };
      requests.push(r);
      if (!r.authorization?.startsWith('Bearer sk_')) {
        return send(res, 401, { error: { type: 'invalid_request_error', message: 'Invalid API Key provided' } });
      }
      if (r.method === 'POST' && (r.path === '/v1/checkout/sessions' || r.path === '/v1/payment_intents') && Object.keys(form).some((k) => k.startsWith('payment_method_types'))) {
        return send(res, 400, {
          error: {
            type: 'invalid_request_error',
            code: 'payment_method_types_no_longer_supported',
            param: 'payment_method_types',
            message: 'payment_method_types is no longer supported on this API version; use allowed_payment_method_types.',
          },
        });
      }
      if (r.method === 'POST' && r.path === '/v1/customers') {
        return send(res, 200, { id: id('cus'), object: 'customer', email: form.email ?? null, name: form.name ?? null, metadata: {} });
      }
      if (r.method === 'POST' && r.path === '/v1/checkout/sessions') {
        const cs = `cs_test_${randomBytes(12).toString('hex')}`;
        return send(res, 200, {
          id: cs,
          object: 'checkout.session',
          mode: form.mode,
          status: 'open',
          payment_status: 'unpaid',
          customer: form.customer ?? null,
          client_reference_id: form.client_reference_id ?? null,
          url: `https://checkout.stripe.com/c/pay/${cs}`,
        });
      }
      if (r.method === 'GET' && r.path === '/v1/payment_intents/search') {
        const m = /^metadata\['checkout_session_id'\]:'([^']*)'$/.exec(url.searchParams.get('query') ?? '');
        if (!m) return send(res, 400, { error: { type: 'invalid_request_error', message: 'This fake answers metadata[checkout_session_id] queries only.' } });
        const data = [...intents].filter(([, i]) => i.metadata?.checkout_session_id === m[1]).map(([piId, i]) => ({ id: piId, object: 'payment_intent', ...i }));
        return send(res, 200, { object: 'search_result', data, has_more: false, next_page: null, url: '/v1/payment_intents/search' });
      }
      const pi = /^\/v1\/payment_intents\/([^/]+)$/.exec(r.path);
      if (r.method === 'GET' && pi) {
        const known = intents.get(pi[1]!);
        if (known) return send(res, 200, { id: pi[1], object: 'payment_intent', ...known });
        return send(res, 200, { id: pi[1], object: 'payment_intent', status: 'succeeded', payment_method: paymentMethodOf.get(pi[1]!) ?? null });
      }
      if (r.method === 'POST' && r.path === '/v1/payment_intents') {
        const piId = id('pi');
        if (declining.has(form.payment_method ?? '')) {
          return send(res, 402, {
            error: {
              type: 'card_error',
              code: 'card_declined',
              decline_code: 'insufficient_funds',
              message: 'Your card has insufficient funds.',
              payment_intent: { id: piId, object: 'payment_intent', status: 'requires_payment_method' },
            },
          });
        }
        const intent: FakeIntent = {
          status: processing.has(form.payment_method ?? '') ? 'processing' : 'succeeded',
          payment_method: form.payment_method ?? null,
          amount: Number(form.amount),
          last_payment_error: null,
          metadata: Object.fromEntries(Object.entries(form).flatMap(([k, v]) => (/^metadata\[(.+)\]$/.exec(k) ? [[/^metadata\[(.+)\]$/.exec(k)![1]!, v]] : []))),
        };
        intents.set(piId, intent);
        return send(res, 200, { id: piId, object: 'payment_intent', ...intent });
      }
      return send(res, 404, { error: { type: 'invalid_request_error', message: `Unrecognized request URL (${r.method}: ${r.path})` } });
    });
  });
  await new Promise<void>((ok) => server.listen(0, '127.0.0.1', () => ok()));
  return {
    host: '127.0.0.1',
    port: (server.address() as AddressInfo).port,
    requests,
    paymentMethodOf,
    declining,
    processing,
    intents,
    close: () =>
      new Promise<void>((ok) => {
        server.close(() => ok());
        server.closeAllConnections();
      }),
  };
}
