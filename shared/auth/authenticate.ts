/**
 * Authentication: one strongly consistent GetItem on the secret's hash (D5, D9). A revoked key's
 * secret items are deleted in the revoke transaction, so a revoke takes effect at once (D6); a
 * rotated-out secret carries `not_after` and stops working 24 h after the rotation.
 */
import { GetCommand } from '@aws-sdk/lib-dynamodb';
import { db, tableName } from '../db/client';
import { keys } from '../db/keys';
import { errors } from '../errors';
import { now } from '../clock';
import { secretShape, sha256hex } from './secrets';
import type { BuyerPrincipal, Env, WorkerPrincipal } from '../types';

/** The secret lookup item (written by the api-keys and worker modules). */
export interface SecretItem {
  principal: 'api_key' | 'worker';
  org_id?: string;
  key_id?: string;
  environment?: Env;
  scopes?: string[];
  worker_id?: string;
  /** Set on a rotated-out secret (D6). */
  not_after?: string;
  /** Unix minute of the last recorded use (throttles the key's last_used_at write to once a minute). */
  used_minute?: number;
}

export async function authenticate(
  authorization: string | undefined,
  expected: 'api_key' | 'worker',
): Promise<BuyerPrincipal | WorkerPrincipal> {
  if (!authorization) throw errors.authentication();
  const m = /^Bearer\s+(\S+)\s*$/i.exec(authorization);
  if (!m) throw errors.authentication('The Authorization header must be "Bearer <key>".');
  const secret = m[1]!;
  const shape = secretShape(secret);
  // D9: buyer keys are refused on worker routes and worker tokens on buyer routes.
  if (!shape || shape.kind !== expected) {
    throw errors.authentication(
      expected === 'worker' ? 'A valid worker token is required.' : 'Invalid API key.',
    );
  }
  const hash = sha256hex(secret);
  const out = await db().send(
    new GetCommand({ TableName: tableName(), Key: keys.secret(hash), ConsistentRead: true }),
  );
  const item = out.Item as SecretItem | undefined;
  if (!item || item.principal !== expected) {
    throw errors.authentication(expected === 'worker' ? 'Invalid worker token.' : 'Invalid API key.');
  }
  if (item.not_after && new Date(item.not_after).getTime() <= now().getTime()) {
    throw errors.authentication('This API key secret was rotated and its 24-hour overlap has ended.');
  }
  if (item.principal === 'worker') return { kind: 'worker', workerId: item.worker_id!, env: item.environment ?? 'live' };
  return {
    kind: 'api_key',
    orgId: item.org_id!,
    keyId: item.key_id!,
    env: item.environment!,
    scopes: item.scopes ?? [],
    previousSecret: !!item.not_after,
    secretHash: hash,
    usedMinute: typeof item.used_minute === 'number' ? item.used_minute : 0,
  };
}
