/**
 * Organizations: signup (D7), identity (D8), settings (D34, D52).
 */
import { GetCommand } from '@aws-sdk/lib-dynamodb';
import { db, tableName } from '../db/client';
import { keys } from '../db/keys';
import { Tx } from '../db/tx';
import { newId } from '../ids';
import { nowIso } from '../clock';
import { audit } from '../audit';
import { errors, ConditionFailed } from '../errors';
import { recordResponse, type MutationContext } from '../context';
import { addKey } from '../api-keys';
import type { BuyerPrincipal } from '../types';

export const STARTER_CREDITS_CENTS = 250;

export const SETTINGS_DEFAULTS = {
  auto_top_up_enabled: false,
  auto_top_up_threshold_cents: 1000,
  auto_top_up_amount_cents: 5000,
} as const;

export async function signup(ctx: MutationContext, input: { name: string; email: string }) {
  const orgId = newId('organization');
  const createdAt = nowIso();
  const email = input.email.trim().toLowerCase();
  const tx = new Tx();
  tx.create('organization', {
    ...keys.organization(orgId),
    entity: 'organization',
    id: orgId,
    name: input.name,
    email,
    has_purchased: false,
    phone_verified_at: null,
    created_at: createdAt,
  });
  tx.create('email', { ...keys.orgEmail(email), entity: 'org_email', org_id: orgId });
  const actor = { type: 'system' as const, id: 'signup' };
  const live = addKey(tx, { ...ctx, actor }, orgId, { name: 'Default live key', environment: 'live' });
  const test = addKey(tx, { ...ctx, actor }, orgId, { name: 'Default test key', environment: 'test' });
  audit(tx, {
    orgId,
    eventType: 'organization.created',
    actor,
    env: null,
    resource: { type: 'organization', id: orgId },
    requestId: ctx.requestId,
    data: { name: input.name },
  });
  const body = {
    object: 'signup' as const,
    organization: { id: orgId, name: input.name, email, created_at: createdAt },
    api_key: live,
    test_api_key: test,
    starter_credits: { amount_cents: STARTER_CREDITS_CENTS, status: 'pending_phone_verification' as const },
  };
  recordResponse(ctx, tx, body, 201);
  try {
    await tx.commit();
  } catch (e) {
    if (e instanceof ConditionFailed && e.reasons.includes('email')) {
      throw errors.conflict('An organization with this e-mail already exists.', [
        { field: 'email', message: 'already registered', code: 'email_taken' },
      ]);
    }
    throw e;
  }
  return body;
}

export function me(p: BuyerPrincipal) {
  return { object: 'me' as const, organization_id: p.orgId, key_id: p.keyId, environment: p.env, scopes: p.scopes };
}

type Settings = {
  auto_top_up_enabled: boolean;
  auto_top_up_threshold_cents: number;
  auto_top_up_amount_cents: number;
};

/**
 * D59: `updated_at` is never null. An object that was never changed (a brand-new organization's
 * settings or balance) was last updated when the organization was created.
 */
export async function organizationCreatedAt(orgId: string): Promise<string> {
  const out = await db().send(new GetCommand({ TableName: tableName(), Key: keys.organization(orgId), ProjectionExpression: 'created_at' }));
  const at = out.Item?.created_at as string | undefined;
  if (!at) throw new Error(`organization ${orgId} has no created_at`);
  return at;
}

function presentSettings(orgId: string, item: Record<string, unknown> | undefined, createdAt: string) {
  return {
    object: 'organization_settings' as const,
    organization_id: orgId,
    auto_top_up_enabled: (item?.auto_top_up_enabled as boolean | undefined) ?? SETTINGS_DEFAULTS.auto_top_up_enabled,
    auto_top_up_threshold_cents:
      (item?.auto_top_up_threshold_cents as number | undefined) ?? SETTINGS_DEFAULTS.auto_top_up_threshold_cents,
    auto_top_up_amount_cents: (item?.auto_top_up_amount_cents as number | undefined) ?? SETTINGS_DEFAULTS.auto_top_up_amount_cents,
    updated_at: (item?.updated_at as string | undefined) ?? createdAt,
  };
}

/** The settings from their item and the organization item read together (e.g. in one batch). */
export function settingsFromItems(orgId: string, item: Record<string, unknown> | undefined, org: Record<string, unknown> | undefined) {
  const at = (item?.updated_at as string | undefined) ?? (org?.created_at as string | undefined);
  if (!at) throw new Error(`organization ${orgId} has no created_at`);
  return presentSettings(orgId, item, at);
}

export async function getSettings(orgId: string) {
  const out = await db().send(new GetCommand({ TableName: tableName(), Key: keys.settings(orgId), ConsistentRead: true }));
  const updated = out.Item?.updated_at as string | undefined;
  return presentSettings(orgId, out.Item, updated ?? (await organizationCreatedAt(orgId)));
}

/** Rounds of read, merge and conditional write before two PATCHes racing without end give up. */
const SETTINGS_WRITE_ATTEMPTS = 10;

/**
 * Merges `patch` into the organization's settings. The write is conditional on the settings item
 * read (its `updated_at`, or its absence): of two PATCHes racing, the later one merges again into
 * what the first wrote, so neither change is lost (D52).
 */
export async function updateSettings(ctx: MutationContext, p: BuyerPrincipal, patch: Partial<Settings>) {
  for (let attempt = 1; ; attempt++) {
    const out = await db().send(new GetCommand({ TableName: tableName(), Key: keys.settings(p.orgId), ConsistentRead: true }));
    const prev = out.Item?.updated_at as string | undefined;
    const current = presentSettings(p.orgId, out.Item, prev ?? (await organizationCreatedAt(p.orgId)));
    const next = { ...current, ...patch, updated_at: nowIso() };
    const tx = new Tx();
    tx.put(
      'settings',
      {
        ...keys.settings(p.orgId),
        entity: 'organization_settings',
        org_id: p.orgId,
        auto_top_up_enabled: next.auto_top_up_enabled,
        auto_top_up_threshold_cents: next.auto_top_up_threshold_cents,
        auto_top_up_amount_cents: next.auto_top_up_amount_cents,
        updated_at: next.updated_at,
      },
      out.Item ? { condition: 'updated_at = :prev', values: { ':prev': prev } } : { condition: 'attribute_not_exists(PK)' },
    );
    audit(tx, {
      orgId: p.orgId,
      eventType: 'organization.settings_updated',
      actor: ctx.actor,
      env: p.env,
      resource: { type: 'organization_settings', id: p.orgId },
      requestId: ctx.requestId,
      data: { changes: patch },
    });
    try {
      await tx.commit();
    } catch (e) {
      if (e instanceof ConditionFailed && e.reasons.includes('settings') && attempt < SETTINGS_WRITE_ATTEMPTS) continue;
      throw e;
    }
    return presentSettings(p.orgId, next, next.updated_at);
  }
}
