/**
 * Authentication (D3, D5, D9), rate limits with their headers (D13, D44), the credits header, and
 * scope enforcement (D42: authentication, then scope, before any resource lookup).
 */
import type middy from '@middy/core';
import type { APIGatewayProxyEvent, APIGatewayProxyResult } from 'aws-lambda';
import { BatchGetCommand, TransactWriteCommand } from '@aws-sdk/lib-dynamodb';
import { authenticate } from '../../auth/authenticate';
import { consume, TIERS, type Limits } from '../../ratelimit';
import { db, tableName } from '../../db/client';
import { keys, type Key } from '../../db/keys';
import { resourceKey } from './resource';
import { errors } from '../../errors';
import { config } from '../../config';
import { now, nowIso } from '../../clock';
import { state } from '../state';
import type { RouteDef } from '../../manifest/routes';
import type { BuyerPrincipal } from '../../types';

type MW = middy.MiddlewareObj<APIGatewayProxyEvent, APIGatewayProxyResult>;

export function authentication(route: RouteDef): MW {
  return {
    before: async (request) => {
      if (route.principal === 'none') return;
      const s = state(request.event);
      s.principal = await authenticate(s.headers['authorization'], route.principal);
    },
  };
}

/**
 * D13 tiers (free until the first completed purchase, then standard; enterprise overrides), the
 * credits header and the path's resource, read together in one strongly consistent BatchGetItem,
 * in parallel with the rate-limit counter: an authenticated read is two sequential steps.
 */
async function tierCreditsAndResource(
  p: BuyerPrincipal,
  resKey: Key | null,
): Promise<{ limits: Limits; credits: number; resource?: { item: Record<string, unknown> | undefined } }> {
  const orgKey = keys.organization(p.orgId);
  const balKey = keys.balance(p.orgId, p.env);
  const want = resKey ? [orgKey, balKey, resKey] : [orgKey, balKey];
  const out = await db().send(new BatchGetCommand({ RequestItems: { [tableName()]: { Keys: want, ConsistentRead: true } } }));
  const items = out.Responses?.[tableName()] ?? [];
  const find = (k: Key) => items.find((i) => i.PK === k.PK && i.SK === k.SK);
  const org = find(orgKey);
  const bal = find(balKey);
  const limits: Limits =
    org?.rate_limits && typeof org.rate_limits === 'object' ? (org.rate_limits as Limits) : org?.has_purchased ? TIERS.standard : TIERS.free;
  // A key DynamoDB left unprocessed was not read: the resource middleware reads it itself.
  const unprocessed = out.UnprocessedKeys?.[tableName()]?.Keys ?? [];
  const resourceRead = resKey && !unprocessed.some((k) => k.PK === resKey.PK && k.SK === resKey.SK);
  return { limits, credits: Number(bal?.available_cents ?? 0), ...(resourceRead ? { resource: { item: find(resKey) } } : {}) };
}

/**
 * last_used_at, written at most once a minute per secret and decided from the minute stamp on the
 * secret item that authentication already read, so the write runs beside the counter (never a
 * third step). The stamp's condition lets one request per minute win; a revoked key's deleted
 * secret item fails the condition, so nothing is recreated.
 */
async function touchLastUsed(p: BuyerPrincipal): Promise<void> {
  const minute = Math.floor(now().getTime() / 60_000);
  if (!p.secretHash || (p.usedMinute ?? 0) >= minute) return;
  await db()
    .send(
      new TransactWriteCommand({
        TransactItems: [
          {
            Update: {
              TableName: tableName(),
              Key: keys.secret(p.secretHash),
              UpdateExpression: 'SET used_minute = :m',
              ConditionExpression: 'attribute_exists(PK) AND (attribute_not_exists(used_minute) OR used_minute < :m)',
              ExpressionAttributeValues: { ':m': minute },
            },
          },
          {
            Update: {
              TableName: tableName(),
              Key: keys.apiKey(p.orgId, p.keyId),
              UpdateExpression: 'SET last_used_at = :t',
              ConditionExpression: 'attribute_exists(PK)',
              ExpressionAttributeValues: { ':t': nowIso() },
            },
          },
        ],
      }),
    )
    .catch(() => undefined);
}

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
        const lookup = tierCreditsAndResource(p, resKey);
        const touched = touchLastUsed(p);
        decision = await consume(`K#${p.keyId}`, lookup.then((x) => x.limits));
        const x = await lookup;
        s.responseHeaders['X-Service-Credits-Remaining'] = String(x.credits);
        if (resKey && x.resource) s.prefetched = { PK: resKey.PK, SK: resKey.SK, item: x.resource.item };
        await touched;
      } else if (route.rateLimit === 'worker' && p?.kind === 'worker') {
        decision = await consume(`W#${p.workerId}`, TIERS.standard);
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
