/**
 * Phone verification gating the starter credits (D7, D43, D57): a 6-digit code by SMS; confirming
 * grants 250 cents once per organization and once per phone number, as a `free_tier` lot expiring
 * in 12 months, in one transaction with the org flag, the phone claim and the audit record.
 * Five wrong codes lock the attempt (a new code must be requested).
 */
import { GetCommand, UpdateCommand } from '@aws-sdk/lib-dynamodb';
import { randomInt, timingSafeEqual } from 'node:crypto';
import { db, tableName } from '../db/client';
import { keys } from '../db/keys';
import { Tx } from '../db/tx';
import { now, addMs, nowIso } from '../clock';
import { audit } from '../audit';
import { errors, ConditionFailed } from '../errors';
import { config } from '../config';
import { sha256hex } from '../auth/secrets';
import { sms } from '../sms';
import { logger } from '../logger';
import { grantCredits } from '../ledger/lots';
import { recordResponse, type MutationContext } from '../context';
import { STARTER_CREDITS_CENTS } from './index';
import type { BuyerPrincipal } from '../types';

export const CODE_TTL_MS = 10 * 60_000;
export const MAX_ATTEMPTS = 5;

async function org(orgId: string) {
  const out = await db().send(new GetCommand({ TableName: tableName(), Key: keys.organization(orgId), ConsistentRead: true }));
  return out.Item!;
}

const alreadyVerified = () => errors.conflict('This organization has already verified a phone number.');

export async function startVerification(ctx: MutationContext, p: BuyerPrincipal, phone: string) {
  if ((await org(p.orgId)).phone_verified_at) throw alreadyVerified();
  const code = config().localFixedOtp ?? String(randomInt(0, 1_000_000)).padStart(6, '0');
  const expiresAt = addMs(now(), CODE_TTL_MS).toISOString();
  const tx = new Tx();
  tx.put('verification', {
    ...keys.phoneVerification(p.orgId),
    entity: 'phone_verification',
    phone,
    code_hash: sha256hex(`${p.orgId}:${code}`),
    attempts: 0,
    expires_at: expiresAt,
    created_at: nowIso(),
  });
  audit(tx, {
    orgId: p.orgId,
    eventType: 'phone_verification.started',
    actor: ctx.actor,
    env: p.env,
    resource: { type: 'organization', id: p.orgId },
    requestId: ctx.requestId,
    data: { phone_last4: phone.slice(-4) },
  });
  const body = { object: 'phone_verification' as const, phone, status: 'pending' as const, expires_at: expiresAt };
  recordResponse(ctx, tx, body, 202);
  // The code goes out before the commit that stores it with this answer: a 202 (which the
  // Idempotency-Key replays) always means a code was sent. A send that fails stores nothing and
  // answers 503, so a retry, with the same key or not, sends a code. (A commit that fails after
  // the send leaves a code that never verifies; the error makes the client ask again.)
  try {
    await sms().send(phone, `Your verification code is ${code}. It expires in 10 minutes.`);
  } catch (e) {
    logger.error('phone verification: the SMS could not be sent', { error: e as Error, phone_tail: phone.slice(-2) });
    throw errors.unavailable('The verification code could not be sent by SMS; nothing was stored. Try again in a moment.', 'sms_unavailable');
  }
  await tx.commit();
  return body;
}

const wrongCode = (message: string, code = 'invalid_code') =>
  errors.validation(message, [{ field: 'code', message, code }]);

export async function confirmVerification(ctx: MutationContext, p: BuyerPrincipal, phone: string, code: string) {
  if ((await org(p.orgId)).phone_verified_at) throw alreadyVerified();
  const out = await db().send(new GetCommand({ TableName: tableName(), Key: keys.phoneVerification(p.orgId), ConsistentRead: true }));
  const v = out.Item;
  if (!v || v.phone !== phone) throw wrongCode('No verification code was sent to this phone number; request one first.', 'no_pending_verification');
  if (Number(v.attempts) >= MAX_ATTEMPTS) throw wrongCode('Too many wrong codes; request a new code.', 'verification_locked');
  if (new Date(v.expires_at as string).getTime() <= now().getTime()) throw wrongCode('The code has expired; request a new one.', 'code_expired');
  const given = Buffer.from(sha256hex(`${p.orgId}:${code}`));
  if (!timingSafeEqual(given, Buffer.from(v.code_hash as string))) {
    await db().send(
      new UpdateCommand({
        TableName: tableName(),
        Key: keys.phoneVerification(p.orgId),
        UpdateExpression: 'ADD attempts :one',
        ExpressionAttributeValues: { ':one': 1 },
      }),
    );
    throw wrongCode('The code is not correct.');
  }

  const at = now();
  const expiresAt = new Date(at);
  expiresAt.setUTCFullYear(expiresAt.getUTCFullYear() + 1); // D33: 12 months
  const tx = new Tx();
  tx.update('organization', keys.organization(p.orgId), 'SET phone_verified_at = :t, phone = :p', {
    condition: 'attribute_exists(PK) AND phone_verified_at = :null',
    values: { ':t': at.toISOString(), ':p': phone, ':null': null },
  });
  tx.create('phone_claim', { ...keys.phoneClaim(phone), entity: 'phone_claim', org_id: p.orgId, created_at: at.toISOString() });
  tx.delete('verification', keys.phoneVerification(p.orgId));
  // Starter credits are live credits: the test environment always starts at 0 (D3).
  grantCredits(tx, p.orgId, 'live', {
    type: 'free_tier',
    amountCents: STARTER_CREDITS_CENTS,
    description: 'Starter credits after phone verification',
    expiresAt: expiresAt.toISOString(),
  });
  audit(tx, {
    orgId: p.orgId,
    eventType: 'phone_verification.confirmed',
    actor: ctx.actor,
    env: p.env,
    resource: { type: 'organization', id: p.orgId },
    requestId: ctx.requestId,
    data: { credits_granted_cents: STARTER_CREDITS_CENTS },
  });
  const body = { object: 'phone_verification' as const, status: 'verified' as const, credits_granted_cents: STARTER_CREDITS_CENTS };
  recordResponse(ctx, tx, body);
  try {
    await tx.commit();
  } catch (e) {
    if (e instanceof ConditionFailed) {
      if (e.reasons.includes('phone_claim')) {
        throw errors.conflict('This phone number already verified another organization.', [
          { field: 'phone', message: 'already used by another organization', code: 'phone_taken' },
        ]);
      }
      if (e.reasons.includes('organization')) throw alreadyVerified();
    }
    throw e;
  }
  return body;
}
