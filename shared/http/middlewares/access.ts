/**
 * Authentication (D3, D5, D9), rate limits with their headers (D13, D44), the credits header, and
 * scope enforcement (D42: authentication, then scope, before any resource lookup).
 */
import type middy from '@middy/core';
import type { APIGatewayProxyEvent, APIGatewayProxyResult } from 'aws-lambda';
import { UpdateCommand } from '@aws-sdk/lib-dynamodb';
import { authenticate, presentedKeyHash } from '../../auth/authenticate';
import { forgetOwner, knownOwner, rememberOwner, sameOwner, type SecretOwner } from '../../auth/owners';
import { consume, decide, TIERS, uncount, type Limits } from '../../ratelimit';
import { forgetTier, learnTier, limitsOf, tierOnBalance } from '../../orgs/rate-tier';
import { db, tableName } from '../../db/client';
import { keys, type Key } from '../../db/keys';
import { batchGetConsistent, keyId } from '../../db/batch-get';
import { readLots } from '../../ledger/balance';
import { resourceKey } from './resource';
import { ApiError, errors } from '../../errors';
import { config } from '../../config';
import { nowIso } from '../../clock';
import { state, type ApiState, type TenantReads } from '../state';
import type { RouteDef } from '../../manifest/routes';
import type { BuyerPrincipal } from '../../types';

type MW = middy.MiddlewareObj<APIGatewayProxyEvent, APIGatewayProxyResult>;
type Item = Record<string, unknown>;
type Tenant = { limits: Limits; credits: number; resource?: { item: Item | undefined }; tenant?: TenantReads };

/** Tenant reads started beside the authenticating count, for the owner this process remembers. */
interface EarlyReads {
  hash: string;
  owner: SecretOwner;
  resKey: Key | null;
  reads: Promise<Tenant>;
}
const early = new WeakMap<ApiState, EarlyReads>();

/**
 * A key this process has authenticated before names its owner before the count returns: the
 * tenant reads go out beside it, one step instead of two. They are used only once the count has
 * authenticated the same owner; otherwise (a revoked key, another owner, a failed write) they are
 * dropped unread and nothing of them reaches the caller.
 */
function startEarlyReads(route: RouteDef, s: ApiState): EarlyReads | undefined {
  const hash = route.principal === 'api_key' && route.rateLimit === 'key' ? presentedKeyHash(s.headers['authorization']) : undefined;
  const owner = hash ? knownOwner(hash) : undefined;
  if (!owner) return undefined;
  const guess: BuyerPrincipal = { kind: 'api_key', ...owner, scopes: [], previousSecret: false };
  const resKey = resourceKey(route, { params: s.params, principal: guess });
  const reads = tenantReads(route, guess, resKey);
  reads.catch(() => undefined); // awaited only when used; a failure then surfaces there
  return { hash: hash!, owner, resKey, reads };
}

export function authentication(route: RouteDef): MW {
  return {
    before: async (request) => {
      if (route.principal === 'none') return;
      const s = state(request.event);
      const e = startEarlyReads(route, s);
      // Rate-limited routes count the request in the same call that authenticates (issue 15).
      const a = await authenticate(s.headers['authorization'], route.principal, { count: route.rateLimit === 'key' || route.rateLimit === 'worker' }).catch(async (err: unknown) => {
        if (e && err instanceof ApiError && err.status === 401) forgetOwner(e.hash);
        await e?.reads.catch(() => undefined); // nothing of the request outlives its answer
        throw err;
      });
      s.principal = a.principal;
      s.counts = a.counts;
      s.sharedCount = a.sharedCount;
      s.countedOn = a.countedOn;
      if (a.principal.kind === 'api_key') {
        rememberOwner(a.principal);
        if (e && sameOwner(e.owner, a.principal)) early.set(s, e);
      }
    },
  };
}

/**
 * D13 tiers (free until the first completed purchase, then standard; enterprise overrides), the
 * credits header, the path's resource and the tenant items the route's domain function declares
 * (`reads`), in one strongly consistent BatchGetItem; a route that reads the credit lots queries
 * them beside it. They follow the authenticating count (two sequential steps), or start beside it
 * for a key this process has authenticated before (one step; see `startEarlyReads`). The tier is
 * the organization item's, or its copy on the balance once this process has seen that the balance
 * carries it (shared/orgs/rate-tier.ts): then the organization is read only by a route that
 * declares it.
 */
async function tenantReads(route: RouteDef, p: BuyerPrincipal, resKey: Key | null): Promise<Tenant> {
  const orgKey = keys.organization(p.orgId);
  const balKey = keys.balance(p.orgId, p.env);
  const setKey = route.reads?.includes('settings') ? keys.settings(p.orgId) : null;
  const readOrg = route.reads?.includes('org') || !tierOnBalance(p.orgId, p.env);
  const want = [...(readOrg ? [orgKey] : []), balKey, ...(setKey ? [setKey] : []), ...(resKey ? [resKey] : [])];
  // One BatchGetItem; keys DynamoDB leaves unprocessed (throttling, which DynamoDB Local never
  // does) are read again, so the tier, the credits header and the resource are never guessed.
  const [items, lots] = await Promise.all([
    batchGetConsistent(want),
    route.reads?.includes('live_credit_lots') && p.env === 'live' ? readLots(p.orgId, p.env) : undefined,
  ]);
  const find = (k: Key) => items.get(keyId(k));
  let org = readOrg ? find(orgKey) : undefined;
  const bal = find(balKey);
  if (readOrg) {
    learnTier(p.orgId, p.env, org, bal);
  } else if (bal?.has_purchased !== true) {
    // The balance no longer carries the tier (it cannot lose it, but never guess): read it.
    forgetTier(p.orgId, p.env);
    org = (await batchGetConsistent([orgKey])).get(keyId(orgKey));
  }
  const limits = limitsOf(org ?? bal);
  const tenant: TenantReads = { ...(org ? { org } : {}), balance: bal, ...(setKey ? { settings: find(setKey) } : {}), ...(lots ? { lots } : {}) };
  return {
    limits,
    credits: Number(bal?.available_cents ?? 0),
    ...(resKey ? { resource: { item: find(resKey) } } : {}),
    tenant,
  };
}

/**
 * last_used_at, written at most once a minute per secret: by the request the secret item counted
 * first in its minute, as one UpdateItem on the key beside the second step's reads (never a step
 * of its own). A revoked key never gets here (its secret items are gone).
 */
async function touchLastUsed(p: BuyerPrincipal): Promise<void> {
  await db()
    .send(
      new UpdateCommand({
        TableName: tableName(),
        Key: keys.apiKey(p.orgId, p.keyId),
        UpdateExpression: 'SET last_used_at = :t',
        ConditionExpression: 'attribute_exists(PK)',
        ExpressionAttributeValues: { ':t': nowIso() },
      }),
    )
    .catch(() => undefined);
}

const sameKey = (a: Key | null, b: Key | null) => a === b || (!!a && !!b && a.PK === b.PK && a.SK === b.SK);

function isLoopback(ip: string): boolean {
  return ip === '127.0.0.1' || ip === '::1' || ip === '::ffff:127.0.0.1' || ip.startsWith('127.');
}

export function rateLimit(route: RouteDef): MW {
  return {
    before: async (request) => {
      const s = state(request.event);
      const p = s.principal;
      let decision;
      if (route.rateLimit === 'key' && p?.kind === 'api_key') {
        const resKey = resourceKey(route, s);
        const e = early.get(s);
        const lookup = e && sameKey(e.resKey, resKey) ? e.reads : tenantReads(route, p, resKey);
        const touched = s.counts?.m === 1 ? touchLastUsed(p) : undefined;
        // D6/D13: while the key has two live secrets, both count on the key's own window item.
        decision = s.counts && !s.sharedCount ? decide(s.counts, (await lookup).limits) : await consume(`K#${p.keyId}`, lookup.then((x) => x.limits));
        if (!decision.allowed && s.counts && !s.sharedCount && s.countedOn) await uncount({ secretHash: s.countedOn }, s.counts);
        const x = await lookup;
        s.responseHeaders['X-Service-Credits-Remaining'] = String(x.credits);
        if (resKey && x.resource) s.prefetched = { PK: resKey.PK, SK: resKey.SK, item: x.resource.item };
        if (x.tenant) s.tenant = x.tenant;
        await touched;
      } else if (route.rateLimit === 'worker' && p?.kind === 'worker') {
        decision = s.counts ? decide(s.counts, TIERS.standard) : await consume(`W#${p.workerId}`, TIERS.standard);
        if (!decision.allowed && s.counts && s.countedOn) await uncount({ secretHash: s.countedOn }, s.counts);
      } else if (route.rateLimit === 'signup_buyer' || route.rateLimit === 'signup_worker') {
        // D44: loopback sources are exempt in the local runtime only.
        if (config().runtime === 'local' && isLoopback(s.sourceIp)) return;
        const kind = route.rateLimit === 'signup_buyer' ? 'buyer' : 'worker';
        decision = await consume(`IP#${kind}#${s.sourceIp}`, TIERS.signup);
      } else {
        return;
      }
      s.responseHeaders['X-RateLimit-Limit'] = String(decision.limit);
      s.responseHeaders['X-RateLimit-Remaining'] = String(decision.remaining);
      s.responseHeaders['X-RateLimit-Reset'] = String(decision.reset);
      if (!decision.allowed) throw errors.rateLimited(decision.retryAfter);
    },
  };
}

export function authorization(route: RouteDef): MW {
  return {
    before: async (request) => {
      if (route.principal !== 'api_key' || route.scope === 'any' || route.scope === null) return;
      const p = state(request.event).principal as BuyerPrincipal;
      if (!p.scopes.includes(route.scope)) {
        throw errors.authorization(`This API key lacks the scope "${route.scope}" required by ${route.method} ${route.path}.`);
      }
    },
  };
}
