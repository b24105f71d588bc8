/** Responses of the webhook endpoint and event routes. */
import * as z from 'zod';
import { environment, id, ts } from './common';

export const endpoint = z
  .looseObject({
    object: z.literal('webhook_endpoint'),
    id: id('we'),
    url: z.string(),
    description: z.string().nullable(),
    events: z.array(z.string()),
    status: z.enum(['enabled', 'disabled']),
    created_at: ts,
    updated_at: ts,
    secret: z.string().optional().describe('`whsec_…`: only on create and rotate_secret.'),
  })
  .meta({ id: 'WebhookEndpoint' });

export const delivery = z.looseObject({
  endpoint_id: z.string(),
  status: z.enum(['pending', 'delivered', 'failed']),
  attempts: z.number().int(),
  last_status_code: z.number().int().nullable(),
  last_attempt_at: ts.nullable().describe('When the last attempt was made; null before the first.'),
  last_error: z
    .string()
    .nullable()
    .describe(
      'Why the last attempt failed (`http_<status>`, `timeout`, `blocked_address`, `dns_failure`, `invalid_url`, or a network error code such as `ECONNREFUSED`), or why the delivery ended without an attempt (`endpoint_disabled`, `endpoint_deleted`, `endpoint_unsubscribed`); null after a success and before the first attempt.',
    ),
  next_attempt_at: ts.nullable(),
});

export const event = z
  .looseObject({
    id: id('evt'),
    object: z.literal('event'),
    type: z.string(),
    api_version: z.string(),
    created_at: ts,
    environment,
    data: z.looseObject({}),
    delivery_status: z.enum(['pending', 'delivered', 'failed']).optional(),
    deliveries: z.array(delivery).optional(),
  })
  .meta({ id: 'Event' });
