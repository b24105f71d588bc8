/** Responses of signup, identity, phone verification, API keys, settings and audit. */
import * as z from 'zod';
import { cents, environment, id, ts, tsOrNull } from './common';

export const apiKey = z
  .looseObject({
    object: z.literal('api_key'),
    id: id('key'),
    name: z.string(),
    environment,
    scopes: z.array(z.string()),
    secret_masked: z.string(),
    created_at: ts,
    last_used_at: tsOrNull,
    revoked_at: tsOrNull,
    previous_secret_expires_at: tsOrNull,
    secret: z.string().optional().describe('Only in the create and rotate responses: store it, it is never shown again.'),
  })
  .meta({ id: 'ApiKey' });

export const signup = z.looseObject({
  object: z.literal('signup'),
  organization: z.looseObject({ id: id('org'), name: z.string(), email: z.string(), created_at: ts }),
  api_key: apiKey,
  test_api_key: apiKey,
  starter_credits: z.looseObject({ amount_cents: cents, status: z.string() }),
});

export const me = z.looseObject({
  object: z.literal('me'),
  organization_id: z.string(),
  key_id: z.string(),
  environment,
  scopes: z.array(z.string()),
});

export const phoneVerificationStarted = z.looseObject({
  object: z.literal('phone_verification'),
  phone: z.string(),
  status: z.literal('pending'),
  expires_at: ts,
});

export const phoneVerificationConfirmed = z.looseObject({
  object: z.literal('phone_verification'),
  status: z.literal('verified'),
  credits_granted_cents: cents,
});

export const settings = z
  .looseObject({
    object: z.literal('organization_settings'),
    organization_id: z.string(),
    auto_top_up_enabled: z.boolean(),
    auto_top_up_threshold_cents: cents,
    auto_top_up_amount_cents: cents,
    updated_at: ts,
  })
  .meta({ id: 'OrganizationSettings' });

export const auditEvent = z
  .looseObject({
    object: z.literal('audit_event'),
    id: id('aud'),
    event_type: z.string(),
    actor: z.looseObject({ type: z.enum(['api_key', 'worker', 'system']), id: z.string() }),
    environment: environment.nullable(),
    resource: z.looseObject({ type: z.string(), id: z.string() }),
    job_id: z.string().nullable(),
    request_id: z.string().nullable(),
    created_at: ts,
    data: z.looseObject({}),
  })
  .meta({ id: 'AuditEvent' });
