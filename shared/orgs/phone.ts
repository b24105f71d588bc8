/**
 * Phone verification gating the starter credits (D7, D43, D57): a 6-digit code by SMS; confirming
 * grants 250 cents once per organization and once per phone number, as a `free_tier` lot expiring
 * in 12 months, in one transaction with the org flag, the phone claim and the audit record.
 * Five wrong codes lock the attempt (a new code must be requested).
 *
 * Brute-force bounds (security fix):
 * - Confirm counts the guess before it compares the code: one UpdateItem `ADD attempts 1` on
 *   condition `attempts < 5` and the same verification (phone, code hash, not expired). Only a
 *   request whose count succeeded compares the code, so concurrent confirms cannot share one slot;
 *   the success transaction deletes the verification only while its code hash is the one compared
 *   and its count is within the budget.
 * - Start is limited to `MAX_STARTS_PER_HOUR` per organization (a fixed clock-hour window item,
 *   the same counter the API-key limits use; 429 `rate_limit_exceeded` with Retry-After). Each start
 *   issues a new code with a fresh budget of 5, so an organization gets at most 5 × 5 guesses an
 *   hour, and at most that many SMS. A start is counted before the SMS is sent, so a failed send
 *   counts too.
 */
import { GetCommand, UpdateCommand } from '@aws-sdk/lib-dynamodb';
import { ConditionalCheckFailedException } from '@aws-sdk/client-dynamodb';
import { randomInt, timingSafeEqual } from 'node:crypto';
import { db, tableName } from '../db/client';
import { keys } from '../db/keys';
import { Tx } from '../db/tx';
import { contentionBackoff } from '../db/conflicts';
import { now, addMs, nowIso } from '../clock';
import { audit } from '../audit';
import { errors, ConditionFailed, Contention } from '../errors';
import { consume } from '../ratelimit';
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
/** Verification starts (codes sent) per organization per clock hour. */
export const MAX_STARTS_PER_HOUR = 5;
/**
 * Codes sent to one phone number per clock hour, whatever the organization: new organizations
 * cannot multiply the SMS a number receives, nor the guesses made at its codes.
 */
export const MAX_STARTS_PER_NUMBER_PER_HOUR = 5;

async function org(orgId: string) {
  const out = await db().send(new GetCommand({ TableName: tableName(), Key: keys.organization(orgId), ConsistentRead: true }));
  return out.Item!;
}

const alreadyVerified = () => errors.conflict('This organization has already verified a phone number.');

export async function startVerification(ctx: MutationContext, p: BuyerPrincipal, phone: string) {
  if ((await org(p.orgId)).phone_verified_at) throw alreadyVerified();
  // Counted before the SMS goes out: the limit bounds both the codes sent and the guesses made.
  const starts = await consume(`PV#${p.orgId}`, { perMinute: Number.MAX_SAFE_INTEGER, perHour: MAX_STARTS_PER_HOUR });
  if (!starts.allowed) throw errors.rateLimited(starts.retryAfter);
  // The number's own count (its hash: no phone number in a key).
  const toNumber = await consume(`PVN#${sha256hex(`phone:${phone}`)}`, { perMinute: Number.MAX_SAFE_INTEGER, perHour: MAX_STARTS_PER_NUMBER_PER_HOUR });
  if (!toNumber.allowed) throw errors.rateLimited(toNumber.retryAfter);
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

const noPending = () => wrongCode('No verification code was sent to this phone number; request one first.', 'no_pending_verification');
const locked = () => wrongCode('Too many wrong codes; request a new code.', 'verification_locked');
const expired = () => wrongCode('The code has expired; request a new one.', 'code_expired');

/**
 * Take one of the verification's guesses: succeeds only while fewer than MAX_ATTEMPTS were taken
 * and the record is still the verification read (same phone and code hash, not expired).
 */
async function countAttempt(orgId: string, phone: string, codeHash: string): Promise<boolean> {
  try {
    await db().send(
      new UpdateCommand({
        TableName: tableName(),
        Key: keys.phoneVerification(orgId),
        UpdateExpression: 'ADD attempts :one',
        ConditionExpression: 'attempts < :max AND phone = :phone AND code_hash = :hash AND expires_at > :now',
        ExpressionAttributeValues: { ':one': 1, ':max': MAX_ATTEMPTS, ':phone': phone, ':hash': codeHash, ':now': nowIso() },
      }),
    );
    return true;
  } catch (e) {
    if (e instanceof ConditionalCheckFailedException || (e as Error).name === 'ConditionalCheckFailedException') return false;
    // A concurrent confirmation's transaction holds the record: it is changing, so read it again.
    if ((e as Error).name === 'TransactionConflictException') return false;
    throw e;
  }
}

/** Reads the pending verification and takes one guess on it; returns the code hash guessed against. */
async function takeGuess(orgId: string, phone: string): Promise<string> {
  // A failed count means the record changed since it was read (another guess took the last slot,
  // it expired, or a new start replaced it): read it again to answer why, or to guess on the new one.
  for (let attempt = 1; attempt <= 3; attempt++) {
    if (attempt > 1) await contentionBackoff(attempt - 1);
    const out = await db().send(new GetCommand({ TableName: tableName(), Key: keys.phoneVerification(orgId), ConsistentRead: true }));
    const v = out.Item;
    // Gone because a concurrent confirmation just verified the number: say that, not "no pending".
    if (!v && attempt > 1 && (await org(orgId)).phone_verified_at) throw alreadyVerified();
    if (!v || v.phone !== phone) throw noPending();
    if (Number(v.attempts) >= MAX_ATTEMPTS) throw locked();
    if (new Date(v.expires_at as string).getTime() <= now().getTime()) throw expired();
    if (await countAttempt(orgId, phone, v.code_hash as string)) return v.code_hash as string;
  }
  throw new Contention(3);
}

export async function confirmVerification(ctx: MutationContext, p: BuyerPrincipal, phone: string, code: string) {
  if ((await org(p.orgId)).phone_verified_at) throw alreadyVerified();
  const codeHash = await takeGuess(p.orgId, phone);
  const given = Buffer.from(sha256hex(`${p.orgId}:${code}`));
  if (!timingSafeEqual(given, Buffer.from(codeHash))) throw wrongCode('The code is not correct.');

  const at = now();
  const expiresAt = new Date(at);
  expiresAt.setUTCFullYear(expiresAt.getUTCFullYear() + 1); // D33: 12 months
  const tx = new Tx();
  tx.update('organization', keys.organization(p.orgId), 'SET phone_verified_at = :t, phone = :p', {
    condition: 'attribute_exists(PK) AND phone_verified_at = :null',
    values: { ':t': at.toISOString(), ':p': phone, ':null': null },
  });
  tx.create('phone_claim', { ...keys.phoneClaim(phone), entity: 'phone_claim', org_id: p.orgId, created_at: at.toISOString() });
  // Only the verification whose code was compared, with this guess within its budget.
  tx.delete('verification', keys.phoneVerification(p.orgId), {
    condition: 'code_hash = :hash AND attempts <= :max',
    values: { ':hash': codeHash, ':max': MAX_ATTEMPTS },
  });
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
      // First: this organization verified meanwhile (a concurrent confirm of its own, which also
      // claimed the phone, so the claim's condition fails too: not another organization's).
      if (e.reasons.includes('organization')) throw alreadyVerified();
      if (e.reasons.includes('phone_claim')) {
        throw errors.conflict('This phone number already verified another organization.', [
          { field: 'phone', message: 'already used by another organization', code: 'phone_taken' },
        ]);
      }
      // A new start replaced the code between the guess and the commit.
      if (e.reasons.includes('verification')) throw wrongCode('A newer code was sent; use the latest code.');
    }
    throw e;
  }
  return body;
}
