/**
 * API keys (D5, D6): create, list (masked), rotate (old secret valid 24 h), revoke (immediate).
 * The key record lives under the organization; each valid secret has a lookup item keyed by its
 * SHA-256 (see auth/authenticate). Every change writes its audit record in the same transaction.
 */
import { GetCommand } from '@aws-sdk/lib-dynamodb';
import { db, tableName } from '../db/client';
import { keys, indexKeys } from '../db/keys';
import { Tx } from '../db/tx';
import { queryPage, listBody } from '../db/query';
import { newId } from '../ids';
import { now, addMs, DAY_MS } from '../clock';
import { audit } from '../audit';
import { ConditionFailed, errors } from '../errors';
import { mayRebuildStale } from '../db/conflicts';
import { recordResponse, type MutationContext } from '../context';
import { SCOPES, type Scope } from '../manifest/scopes';
import { maskSecret, newApiSecret, sha256hex } from '../auth/secrets';
import type { SecretItem } from '../auth/authenticate';
import type { Env } from '../types';
import { carryOverUpdate, windowsAt, SECRET_COUNTER as C } from '../ratelimit';

export const ROTATION_OVERLAP_MS = DAY_MS;

type Item = Record<string, unknown>;

export function presentKey(item: Item, secret?: string) {
  return {
    object: 'api_key' as const,
    id: item.id as string,
    name: item.name as string,
    environment: item.environment as Env,
    scopes: item.scopes as string[],
    secret_masked: item.secret_masked as string,
    created_at: item.created_at as string,
    last_used_at: (item.last_used_at as string | null) ?? null,
    revoked_at: (item.revoked_at as string | null) ?? null,
    previous_secret_expires_at: (item.previous_secret_expires_at as string | null) ?? null,
    ...(secret ? { secret } : {}),
  };
}
export type ApiKeyView = ReturnType<typeof presentKey>;

function secretItem(hash: string, orgId: string, keyId: string, env: Env, scopes: string[]) {
  const item: SecretItem & Record<string, unknown> = {
    ...keys.secret(hash),
    entity: 'secret',
    principal: 'api_key',
    org_id: orgId,
    key_id: keyId,
    environment: env,
    scopes,
  };
  return item as typeof item & { PK: string; SK: string };
}

/** Add a new key (record + secret lookup + audit) to `tx`; returns the view including the secret. */
export function addKey(
  tx: Tx,
  ctx: MutationContext,
  orgId: string,
  input: { name: string; environment: Env; scopes?: Scope[] },
): ApiKeyView {
  const id = newId('apiKey');
  const secret = newApiSecret(input.environment);
  const scopes = input.scopes ? [...new Set(input.scopes)] : [...SCOPES];
  const item = {
    ...keys.apiKey(orgId, id),
    entity: 'api_key',
    id,
    org_id: orgId,
    name: input.name,
    environment: input.environment,
    scopes,
    secret_hash: sha256hex(secret),
    secret_masked: maskSecret(secret),
    created_at: now().toISOString(),
    last_used_at: null,
    revoked_at: null,
    previous_secret_hash: null,
    previous_secret_expires_at: null,
  };
  tx.create('api_key', item);
  tx.create('secret', secretItem(item.secret_hash, orgId, id, input.environment, scopes));
  audit(tx, {
    orgId,
    eventType: 'api_key.created',
    actor: ctx.actor,
    env: input.environment,
    resource: { type: 'api_key', id },
    requestId: ctx.requestId,
    data: { name: input.name, scopes },
  });
  return presentKey(item, secret);
}

export async function createKey(
  ctx: MutationContext,
  orgId: string,
  input: { name: string; environment: Env; scopes?: Scope[] },
): Promise<ApiKeyView> {
  const tx = new Tx();
  const view = addKey(tx, ctx, orgId, input);
  recordResponse(ctx, tx, view);
  await tx.commit();
  return view;
}

export async function listKeys(orgId: string, limit: number, cursor?: string) {
  const ix = indexKeys.orgApiKeys(orgId);
  const page = await queryPage<Item>({
    index: ix.index,
    pk: ix.pk,
    skPrefix: ix.skPrefix,
    limit,
    cursor,
    binding: `keys#${orgId}`,
  });
  return listBody(page.items.map((i) => presentKey(i)), page);
}

/** Attempts of a rotation whose old secret kept counting requests between our read and commit. */
const ROTATE_ATTEMPTS = 8;

/**
 * What the rotation does about the request count (D13, shared/ratelimit): from now until the end
 * of the hour in which the overlap ends, both secrets count on the key's own window item. When the
 * current secret counted this hour's requests on its own item, the rotation adds those counts to
 * the key's window item, on the condition that the secret counted nothing more meanwhile.
 */
async function countCarryOver(tx: Tx, keyId: string, secretHash: string): Promise<{ condition: string; names: Record<string, string>; values: Record<string, unknown> }> {
  const out = await db().send(new GetCommand({ TableName: tableName(), Key: keys.secret(secretHash), ConsistentRead: true }));
  const old = out.Item as (SecretItem & Item) | undefined;
  const w = windowsAt();
  const alreadyShared = !!old?.not_after || (typeof old?.shared_count_until === 'number' && w.t < old.shared_count_until);
  if (!old || alreadyShared) return { condition: 'attribute_exists(PK)', names: {}, values: {} };
  if (Number(old[C.hour] ?? 0) !== w.hourStart) {
    // Nothing counted this hour yet: the key's window item starts from zero.
    return { condition: 'attribute_exists(PK) AND (attribute_not_exists(#rh) OR #rh < :rh)', names: { '#rh': C.hour }, values: { ':rh': w.hourStart } };
  }
  const minutes: Record<number, number> = {};
  for (const [name, v] of Object.entries(old)) if (C.isMinute(name)) minutes[C.minuteIndexOf(name)] = Number(v);
  const carry = carryOverUpdate(`K#${keyId}`, w.hourStart, Number(old[C.total] ?? 0), minutes);
  tx.update('rate_window', carry.key, carry.expression, { names: carry.names, values: carry.values });
  return { condition: '#rh = :rh AND #rn = :rn', names: { '#rh': C.hour, '#rn': C.total }, values: { ':rh': w.hourStart, ':rn': Number(old[C.total] ?? 0) } };
}

/**
 * Rotate: a new secret now; the current one keeps working until `previous_secret_expires_at`
 * (24 h). A previous secret still inside its overlap is retired at once (one overlap at a time).
 */
export async function rotateKey(ctx: MutationContext, orgId: string, key: Item): Promise<ApiKeyView> {
  if (key.revoked_at) throw errors.conflict('This API key is revoked and cannot be rotated.');
  const secret = newApiSecret(key.environment as Env);
  const hash = sha256hex(secret);
  const at = now();
  const overlapEnds = addMs(at, ROTATION_OVERLAP_MS).toISOString();
  const overlapEndsSec = Math.floor(Date.parse(overlapEnds) / 1000);
  const view = presentKey(
    { ...key, secret_masked: maskSecret(secret), previous_secret_expires_at: overlapEnds },
    secret,
  );
  const since = Date.now();
  for (let attempt = 0; ; attempt++) {
    const tx = new Tx();
    tx.update(
      'api_key',
      keys.apiKey(orgId, key.id as string),
      'SET secret_hash = :h, secret_masked = :m, previous_secret_hash = :ph, previous_secret_expires_at = :pe',
      {
        condition: 'secret_hash = :old AND revoked_at = :null',
        values: { ':h': hash, ':m': maskSecret(secret), ':ph': key.secret_hash, ':pe': overlapEnds, ':old': key.secret_hash, ':null': null },
      },
    );
    const counted = await countCarryOver(tx, key.id as string, key.secret_hash as string);
    tx.update('old_secret', keys.secret(key.secret_hash as string), 'SET not_after = :pe, #ttl = :ttl', {
      condition: counted.condition,
      names: { '#ttl': 'ttl', ...counted.names },
      // TTL only cleans up; authentication compares not_after itself.
      values: { ':pe': overlapEnds, ':ttl': overlapEndsSec + 3600, ...counted.values },
    });
    if (key.previous_secret_hash) tx.delete('older_secret', keys.secret(key.previous_secret_hash as string));
    tx.create('secret', {
      ...secretItem(hash, orgId, key.id as string, key.environment as Env, key.scopes as string[]),
      // Both secrets share the key's count until the hour in which the overlap ends is over.
      shared_count_until: overlapEndsSec - (overlapEndsSec % 3600) + 3600,
    });
    audit(tx, {
      orgId,
      eventType: 'api_key.rotated',
      actor: ctx.actor,
      env: key.environment as Env,
      resource: { type: 'api_key', id: key.id as string },
      requestId: ctx.requestId,
      data: { previous_secret_expires_at: overlapEnds },
    });
    recordResponse(ctx, tx, view);
    try {
      await tx.commit();
      return view;
    } catch (e) {
      if (e instanceof ConditionFailed && e.reasons.includes('old_secret') && !e.reasons.includes('api_key') && attempt < ROTATE_ATTEMPTS && mayRebuildStale(since)) {
        // Requests on the old secret moved its count: read again after a jittered pause, so a
        // key under heavy traffic still gets rotated.
        await new Promise((r) => setTimeout(r, Math.random() * Math.min(200, 10 * 2 ** attempt)));
        continue;
      }
      // Only the old secret's count kept moving: a retry can succeed (Retry-After frees the
      // Idempotency-Key instead of storing this answer).
      if (e instanceof ConditionFailed && !e.reasons.includes('api_key')) {
        throw errors.conflict('The key was in heavy use while rotating; retry in a moment.', undefined, { 'Retry-After': '1' });
      }
      if (e instanceof ConditionFailed) throw errors.conflict('The key changed while rotating (rotated or revoked concurrently); fetch it and retry.');
      throw e;
    }
  }
}

/** Revoke: immediate and permanent (D6). Revoking a revoked key is a no-op 204. */
export async function revokeKey(ctx: MutationContext, orgId: string, key: Item): Promise<void> {
  if (key.revoked_at) return;
  const tx = new Tx();
  // Not revoked yet: of two concurrent revokes one commits, the other finds it revoked (a no-op,
  // one `revoked_at`, one audit record).
  tx.update('api_key', keys.apiKey(orgId, key.id as string), 'SET revoked_at = :t', {
    condition: 'secret_hash = :h AND (attribute_not_exists(revoked_at) OR revoked_at = :null)',
    values: { ':t': now().toISOString(), ':h': key.secret_hash, ':null': null },
  });
  tx.delete('secret', keys.secret(key.secret_hash as string));
  if (key.previous_secret_hash) tx.delete('previous_secret', keys.secret(key.previous_secret_hash as string));
  audit(tx, {
    orgId,
    eventType: 'api_key.revoked',
    actor: ctx.actor,
    env: key.environment as Env,
    resource: { type: 'api_key', id: key.id as string },
    requestId: ctx.requestId,
  });
  recordResponse(ctx, tx, null, 204);
  try {
    await tx.commit();
  } catch (e) {
    if ((e as Error).name !== 'ConditionFailed') throw e;
    // Rotated or revoked concurrently: read again and revoke what is current now.
    const fresh = await db().send(new GetCommand({ TableName: tableName(), Key: keys.apiKey(orgId, key.id as string), ConsistentRead: true }));
    if (fresh.Item && !fresh.Item.revoked_at) return revokeKey(ctx, orgId, fresh.Item);
  }
}
