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
