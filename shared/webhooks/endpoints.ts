/**
 * Webhook endpoints (D36): create (secret shown once), list, get, update, delete, rotate_secret.
 * The signing secret is stored sealed (AES-256-GCM, secrets.ts); after a rotation the previous
 * secret keeps signing for 24 h (D37). URLs pass the SSRF guard when saved (ssrf.ts) and again at
 * connect time (sender.ts). Every change writes its audit record in the same transaction (D39).
 */
import { keys, indexKeys } from '../db/keys';
import { Tx } from '../db/tx';
import { queryPage, listBody, partitionPages } from '../db/query';
import { newId } from '../ids';
import { now, addMs, DAY_MS } from '../clock';
import { audit } from '../audit';
import { ConditionFailed, errors } from '../errors';
import { recordResponse, type MutationContext } from '../context';
import { EVENT_TYPES, type EventType } from '../outbox';
import { newWebhookSecret, openEndpointSecret, sealEndpointSecret } from './secrets';
import { resolvePublic, UnsafeUrl, type Resolver } from './ssrf';
import { countEndpoint, ensureEndpointCount, MAX_ENDPOINTS } from './endpoint-count';
import { webhookConfig } from './config';
import type { BuyerPrincipal, Env } from '../types';

/** D37: both secrets sign for 24 h after a rotation. */
export const ROTATION_OVERLAP_MS = DAY_MS;
export const WILDCARD = '*';
export const SUBSCRIBABLE = [...EVENT_TYPES, WILDCARD] as const;
export type EndpointStatus = 'enabled' | 'disabled';

type Item = Record<string, unknown>;

export function presentEndpoint(item: Item, secret?: string) {
  return {
    object: 'webhook_endpoint' as const,
    id: item.id as string,
    url: item.url as string,
    description: (item.description as string | null) ?? null,
    events: item.events as string[],
    status: item.status as EndpointStatus,
    created_at: item.created_at as string,
    updated_at: item.updated_at as string,
    ...(secret ? { secret } : {}),
  };
}
export type EndpointView = ReturnType<typeof presentEndpoint>;

export function subscribes(endpoint: Item, type: string): boolean {
  const events = (endpoint.events as string[]) ?? [];
  return events.includes(WILDCARD) || events.includes(type);
}

/** Test seam for the save-time DNS check (the SSRF table test passes names without real DNS). */
let saveResolver: Resolver | undefined;
export function setSaveResolverForTests(r: Resolver | undefined): void {
  saveResolver = r;
}

/** D36: https and public addresses only, checked at save time; 400 naming `url` otherwise. */
export async function assertSafeUrl(url: string): Promise<void> {
  try {
    await resolvePublic(url, { allowLoopback: webhookConfig().allowLoopback }, saveResolver);
  } catch (e) {
    if (e instanceof UnsafeUrl) throw errors.validation(`Invalid webhook URL: ${e.message}.`, [{ field: 'url', message: e.message, code: e.code }]);
    throw e;
  }
}

const uniq = (events: string[]) => [...new Set(events)];

export { MAX_ENDPOINTS } from './endpoint-count';

export async function createEndpoint(
  ctx: MutationContext,
  p: BuyerPrincipal,
  input: { url: string; description?: string | null; events: string[] },
): Promise<EndpointView> {
  await assertSafeUrl(input.url);
  const id = newId('webhookEndpoint');
  const secret = newWebhookSecret();
  const at = now().toISOString();
  const secretSealed = await sealEndpointSecret(secret, id);
  await ensureEndpointCount(p);
  const item = {
    ...keys.webhookEndpoint(p.orgId, p.env, id),
    entity: 'webhook_endpoint',
    id,
    org_id: p.orgId,
    environment: p.env,
    url: input.url,
    description: input.description ?? null,
    events: uniq(input.events),
    status: 'enabled',
    secret_sealed: secretSealed,
    previous_secret_sealed: null,
    previous_secret_expires_at: null,
    failing_since: null,
    disabled_reason: null,
    created_at: at,
    updated_at: at,
  };
  const tx = new Tx();
  tx.create('webhook_endpoint', item);
  countEndpoint(tx, p, 1);
  audit(tx, {
    orgId: p.orgId,
    eventType: 'webhook_endpoint.created',
    actor: ctx.actor,
    env: p.env,
    resource: { type: 'webhook_endpoint', id },
    requestId: ctx.requestId,
    data: { url: item.url, events: item.events },
  });
  const view = presentEndpoint(item, secret);
  recordResponse(ctx, tx, view, 201);
  try {
    await tx.commit();
  } catch (e) {
    if (e instanceof ConditionFailed && e.reasons.includes('endpoint_count')) {
      throw errors.conflict(`This environment already has ${MAX_ENDPOINTS} webhook endpoints, the most it can have; delete one first.`, [
        { message: `at most ${MAX_ENDPOINTS} endpoints`, code: 'endpoint_limit_reached' },
      ]);
    }
    throw e;
  }
  return view;
}

export async function listEndpoints(p: BuyerPrincipal, limit: number, cursor?: string) {
  const ix = indexKeys.tenantWebhookEndpoints(p.orgId, p.env);
  const page = await queryPage<Item>({
    index: ix.index,
    pk: ix.pk,
    skPrefix: ix.skPrefix,
    limit,
    cursor,
    binding: JSON.stringify(['webhook_endpoints', p.orgId, p.env]),
  });
  return listBody(page.items.map((i) => presentEndpoint(i)), page);
}

/**
 * Every endpoint of a tenant (the dispatcher's fan-out, replay): all pages of the partition, read
 * with DynamoDB's own LastEvaluatedKey. No list cursor: those are signed with the `cursor` secret,
 * which the webhooks consumer and the replay route are not granted (and an internal loop need not sign).
 */
export async function allEndpoints(orgId: string, env: Env): Promise<Item[]> {
  const out: Item[] = [];
  for await (const page of partitionPages(indexKeys.tenantWebhookEndpoints(orgId, env))) out.push(...(page.items as Item[]));
  return out;
}

async function commitOrConflict(tx: Tx, what: string): Promise<void> {
  try {
    await tx.commit();
  } catch (e) {
    if ((e as Error).name === 'ConditionFailed') throw errors.conflict(`The webhook endpoint changed or was deleted while ${what}; fetch it and retry.`);
    throw e;
  }
}

export async function updateEndpoint(
  ctx: MutationContext,
  p: BuyerPrincipal,
  endpoint: Item,
  input: { url?: string; description?: string | null; events?: string[]; status?: EndpointStatus },
): Promise<EndpointView> {
  if (input.url !== undefined) await assertSafeUrl(input.url);
  const next: Item = { ...endpoint, updated_at: now().toISOString() };
  if (input.url !== undefined) next.url = input.url;
  if (input.description !== undefined) next.description = input.description;
  if (input.events !== undefined) next.events = uniq(input.events);
  // Re-enabling a disabled endpoint starts a fresh failure window (D37: 5 days of only failures
  // disables); `status: 'enabled'` sent again to an enabled endpoint (a client that PATCHes the
  // whole object back) leaves the window running.
  const reEnabling = input.status === 'enabled' && endpoint.status !== 'enabled';
  if (input.status !== undefined) {
    next.status = input.status;
    if (reEnabling) {
      next.failing_since = null;
      next.disabled_reason = null;
    } else if (endpoint.status !== 'disabled') next.disabled_reason = 'disabled_by_user';
  }
  // The failure window is the dispatcher's (it writes failing_since without touching updated_at):
  // only re-enabling writes it (a fresh window), so an edit never puts back a window a delivery
  // has closed, nor clears one it has opened.
  const health =
    reEnabling ? ', failing_since = :fs, disabled_reason = :dr' : next.disabled_reason !== endpoint.disabled_reason ? ', disabled_reason = :dr' : '';
  const tx = new Tx();
  tx.update(
    'webhook_endpoint',
    keys.webhookEndpoint(p.orgId, p.env, endpoint.id as string),
    `SET #url = :url, description = :d, events = :ev, #status = :st, updated_at = :u${health}`,
    {
      condition: 'attribute_exists(PK) AND updated_at = :prev',
      names: { '#url': 'url', '#status': 'status' },
      values: {
        ':url': next.url,
        ':d': next.description ?? null,
        ':ev': next.events,
        ':st': next.status,
        ':u': next.updated_at,
        ...(health.includes(':fs') ? { ':fs': null } : {}),
        ...(health.includes(':dr') ? { ':dr': next.disabled_reason ?? null } : {}),
        ':prev': endpoint.updated_at,
      },
    },
  );
  audit(tx, {
    orgId: p.orgId,
    eventType: 'webhook_endpoint.updated',
    actor: ctx.actor,
    env: p.env,
    resource: { type: 'webhook_endpoint', id: endpoint.id as string },
    requestId: ctx.requestId,
    data: { fields: Object.keys(input).filter((k) => (input as Item)[k] !== undefined) },
  });
  const view = presentEndpoint(next);
  recordResponse(ctx, tx, view);
  await commitOrConflict(tx, 'updating');
  return view;
}

export async function deleteEndpoint(ctx: MutationContext, p: BuyerPrincipal, endpoint: Item): Promise<void> {
  await ensureEndpointCount(p);
  const tx = new Tx();
  tx.delete('webhook_endpoint', keys.webhookEndpoint(p.orgId, p.env, endpoint.id as string), { condition: 'attribute_exists(PK)' });
  countEndpoint(tx, p, -1);
  audit(tx, {
    orgId: p.orgId,
    eventType: 'webhook_endpoint.deleted',
    actor: ctx.actor,
    env: p.env,
    resource: { type: 'webhook_endpoint', id: endpoint.id as string },
    requestId: ctx.requestId,
    data: { url: endpoint.url },
  });
  recordResponse(ctx, tx, null, 204);
  try {
    await tx.commit();
  } catch (e) {
    // Deleted concurrently: the outcome the caller asked for (DELETE is idempotent).
    if ((e as Error).name !== 'ConditionFailed') throw e;
  }
}

/** D36/D37: a new secret now; the current one keeps signing until 24 h from now. */
export async function rotateEndpointSecret(ctx: MutationContext, p: BuyerPrincipal, endpoint: Item): Promise<EndpointView> {
  const id = endpoint.id as string;
  const secret = newWebhookSecret();
  const at = now();
  const overlapEnds = addMs(at, ROTATION_OVERLAP_MS).toISOString();
  const sealed = await sealEndpointSecret(secret, id);
  const tx = new Tx();
  tx.update(
    'webhook_endpoint',
    keys.webhookEndpoint(p.orgId, p.env, id),
    'SET secret_sealed = :s, previous_secret_sealed = :ps, previous_secret_expires_at = :pe, updated_at = :u',
    {
      condition: 'attribute_exists(PK) AND secret_sealed = :old',
      values: {
        ':s': sealed,
        ':ps': endpoint.secret_sealed,
        ':pe': overlapEnds,
        ':u': at.toISOString(),
        ':old': endpoint.secret_sealed,
      },
    },
  );
  audit(tx, {
    orgId: p.orgId,
    eventType: 'webhook_endpoint.secret_rotated',
    actor: ctx.actor,
    env: p.env,
    resource: { type: 'webhook_endpoint', id },
    requestId: ctx.requestId,
    data: { previous_secret_expires_at: overlapEnds },
  });
  const view = presentEndpoint({ ...endpoint, updated_at: at.toISOString() }, secret);
  recordResponse(ctx, tx, view);
  await commitOrConflict(tx, 'rotating its secret');
  return view;
}

/** The secrets that sign a delivery at `at`: the current one, plus the previous one inside its 24 h. */
export async function signingSecrets(endpoint: Item, at: Date): Promise<{ current: string; previous: string | null }> {
  const id = endpoint.id as string;
  const current = await openEndpointSecret(endpoint.secret_sealed as string, id);
  const pe = endpoint.previous_secret_expires_at as string | null;
  const previous =
    endpoint.previous_secret_sealed && pe && at.getTime() < Date.parse(pe) ? await openEndpointSecret(endpoint.previous_secret_sealed as string, id) : null;
  return { current, previous };
}

export type { EventType };
