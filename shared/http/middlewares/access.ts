/**
 * Authentication (D3, D5, D9), rate limits with their headers (D13, D44), the credits header, and
 * scope enforcement (D42: authentication, then scope, before any resource lookup).
 */
import type middy from '@middy/core';
import type { APIGatewayProxyEvent, APIGatewayProxyResult } from 'aws-lambda';
import { BatchGetCommand, UpdateCommand } from '@aws-sdk/lib-dynamodb';
import { authenticate } from '../../auth/authenticate';
import { consume, TIERS, type Limits } from '../../ratelimit';
import { db, tableName } from '../../db/client';
import { keys } from '../../db/keys';
import { errors } from '../../errors';
import { config } from '../../config';
import { nowIso } from '../../clock';
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
 * D13 tiers (free until the first completed purchase, then standard; enterprise overrides) and the
 * credits header, read together in one BatchGetItem.
 */
async function tierAndCredits(p: BuyerPrincipal): Promise<{ limits: Limits; credits: number }> {
  const orgKey = keys.organization(p.orgId);
  const balKey = keys.balance(p.orgId, p.env);
  const out = await db().send(new BatchGetCommand({ RequestItems: { [tableName()]: { Keys: [orgKey, balKey] } } }));
  const items = out.Responses?.[tableName()] ?? [];
  const org = items.find((i) => i.PK === orgKey.PK && i.SK === orgKey.SK);
  const bal = items.find((i) => i.PK === balKey.PK && i.SK === balKey.SK);
  const limits: Limits =
    org?.rate_limits && typeof org.rate_limits === 'object' ? (org.rate_limits as Limits) : org?.has_purchased ? TIERS.standard : TIERS.free;
  return { limits, credits: Number(bal?.available_cents ?? 0) };
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
        const lookup = tierAndCredits(p);
        decision = await consume(`K#${p.keyId}`, lookup.then((x) => x.limits));
        const d = decision;
        s.responseHeaders['X-Service-Credits-Remaining'] = String((await lookup).credits);
        if (d.firstInMinute) {
          // last_used_at, written at most once a minute per key.
          await db().send(
            new UpdateCommand({
              TableName: tableName(),
              Key: keys.apiKey(p.orgId, p.keyId),
              UpdateExpression: 'SET last_used_at = :t',
              ConditionExpression: 'attribute_exists(PK)',
              ExpressionAttributeValues: { ':t': nowIso() },
            }),
          ).catch(() => undefined);
        }
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
