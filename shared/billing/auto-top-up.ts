/**
 * Auto top-up (D34, D62): an off-session charge of the card on file when the available balance
 * crosses the organization's threshold.
 */
import { Tx } from '../db/tx';
import { retryingConflicts } from '../db/conflicts';
import { keys } from '../db/keys';
import { now, nowIso } from '../clock';
import { emit } from '../outbox';
import { audit } from '../audit';
import { logger } from '../logger';
import { systemContext } from '../context';
import { getOrganization } from './checkout';
import { addSession, getSession } from './checkout-session';
import { confirmCheckout, type ConfirmOutcome } from './confirm-checkout';
import { getSettings } from '../orgs';
import { ConditionFailed } from '../errors';
import { GetCommand, UpdateCommand } from '@aws-sdk/lib-dynamodb';
import { db, tableName } from '../db/client';
import { jsonBody, PoisonMessage, RetryLater } from '../work/stage-message';
import { paymentProvider, type ChargeResult } from './provider';
import { derivedId, isId } from '../ids';
import type { Env } from '../types';
import { streamRecordOf } from '../manifest/stream-event';

type Item = Record<string, unknown>;
type Settings = Awaited<ReturnType<typeof getSettings>>;

/**
 * The top-up a `credits.low_balance` event asks for (D34): its checkout session is named after the
 * event (`cs_` + the event id's ULID), so a redelivered or concurrent message finds the session the
 * first one created, and the provider's idempotency key (the session id) charges the card once.
 */
export const topUpSessionId = (eventId: string) => derivedId('checkoutSession', eventId);

/**
 * D34 auto top-up, run by the `top-ups` queue for the `credits.low_balance` event of a crossing
 * (pipe `auto-top-up` in shared/manifest/wiring.ts), so the commit that crossed the threshold also
 * queues the top-up and the request or sweep that crossed it never waits for the card network.
 * With the settings and card at that moment: charge the payment method on file (left by the first
 * hosted checkout) off-session through the provider, then apply it like any purchase, plus
 * `credits.auto_topped_up`. A decline (or a deployment without payments) grants nothing and emits
 * `credits.auto_top_up_failed {amount_cents, reason}`. Auto top-up turned off since, or no payment
 * method on file: nothing happens. The test environment is never charged: its top-up is confirmed
 * at once without asking the processor.
 *
 * Idempotent: a session already paid, failed or cancelled is left alone. One still open is either
 * recorded as charged (a run that stopped after the charge was accepted: applied without charging
 * again) or charged under the same idempotency key, which the provider answers with the first
 * charge of the key; either way it is applied once.
 *
 * Until a charge is started, the settings of the moment decide, not those the session was opened
 * with: a run that opened the session and stopped, delivered again after the buyer turned auto
 * top-up off, cancels the session (reason `disabled`) and charges nothing. Starting the charge is
 * written on the session first (`charge_payment_method`), and the cancellation is conditioned on
 * its absence, so a cancellation never races a charge already on its way to the processor; once
 * started, a charge is finished (same card, same idempotency key) whatever the settings say.
 *
 * A charge the processor accepted but has not settled (Stripe `processing`) is neither granted nor
 * declined: its reference is recorded on the session (`pending_charge_ref`), which stays open, and
 * the run throws `TopUpPending` (a RetryLater), so the queue brings the message back with backoff;
 * the later run reads the charge again and applies it, or fails the session on a final refusal.
 */
export async function runAutoTopUp(orgId: string, env: Env, eventId: string): Promise<ConfirmOutcome | null> {
  const id = topUpSessionId(eventId);
  let session = await getSession(id);
  const org = await getOrganization(orgId);
  const pm = org?.payment_method as string | undefined;
  let settings: Settings | undefined;
  if (!session) {
    settings = await getSettings(orgId);
    if (!settings.auto_top_up_enabled || !pm) return null;
    session = await openSession(id, orgId, env, settings.auto_top_up_amount_cents);
  }
  if (session.status !== 'open') return null; // applied, declined or cancelled by an earlier delivery
  const amount = Number(session.amount_cents);
  const testMode = session.provider === 'test_mode';
  const charged = str(session.charged_ref);
  const pending = str(session.pending_charge_ref);
  let chargePm = str(session.charge_payment_method);
  // A charge an earlier run started whose answer never came back: once the processor's
  // idempotency key may have expired, the same key would make a second charge; look it up first.
  const startedAt = str(session.charge_started_at);
  const keyMayHaveExpired = !!chargePm && !!startedAt && now().getTime() - new Date(startedAt).getTime() >= CHARGE_KEY_TRUSTED_MS;
  if (!charged && !pending && !chargePm) {
    // Nothing charged yet: the settings of now decide (D34).
    settings ??= await getSettings(orgId);
    if (!settings.auto_top_up_enabled) return cancelTopUp(session, 'disabled');
    if (!testMode) {
      if (!pm) return failTopUp(session, 'no_payment_method', null, { beforeCharge: true }); // removed since the session opened
      const started = await startCharge(id, orgId, pm);
      if (started === 'disabled') return cancelTopUp(session, 'disabled');
      if (!started) return null; // settled meanwhile by a concurrent run
      chargePm = started;
    }
  }
  const provider = paymentProvider();
  const charge: ChargeResult = testMode
    ? { ok: true, providerRef: `test_mode_${id}` }
    : charged
      ? { ok: true, providerRef: charged } // an earlier run was paid and stopped before applying it
      : pending
        ? await provider.chargeStatus(pending) // accepted earlier, not settled then: ask again
        : ((keyMayHaveExpired ? await provider.findCharge(id) : null) ??
          (await provider.chargeSaved({ customerRef: (org?.stripe_customer_id as string | undefined) ?? null, paymentMethod: chargePm!, amountCents: amount, reference: id })));
  let outcome: ConfirmOutcome;
  if (charge.ok) {
    // The payment is on the session before it is applied: a later run applies it without charging
    // again, even after the processor's idempotency key has expired (24 hours for Stripe).
    if (!testMode && !charged) await recordRef(id, 'charged_ref', charge.providerRef);
    // The card on file is left as it is: this charge learnt nothing new about it, and the buyer may
    // have saved another one meanwhile (a hosted checkout), which must not be put back.
    outcome = (await confirmCheckout(id, { paymentMethod: null, providerRef: charge.providerRef, alreadyCharged: true })).outcome;
  } else if (charge.pending) {
    if (!pending) await recordRef(id, 'pending_charge_ref', charge.providerRef);
    logger.info('auto top-up charge not settled yet; asked again later', { org_id: orgId, amount_cents: amount, provider_ref: charge.providerRef });
    throw new TopUpPending(id, charge.providerRef);
  } else outcome = await failTopUp(session, charge.reason, charge.providerRef);
  logger.info('auto top-up', { org_id: orgId, amount_cents: amount, outcome, ...(charge.ok ? {} : { reason: charge.reason }) });
  return outcome;
}

/**
 * How long after a charge started its idempotency key is trusted to answer the first charge again
 * (Stripe keeps keys for at least 24 hours): past it, the charge is looked up before any new one.
 */
export const CHARGE_KEY_TRUSTED_MS = 23 * 60 * 60 * 1000;

/** A top-up charge accepted by the processor and not settled yet: the message is retried later. */
export class TopUpPending extends RetryLater {
  constructor(
    readonly sessionId: string,
    readonly providerRef: string,
  ) {
    super(`auto top-up ${sessionId}: charge ${providerRef} is still processing`);
    this.name = 'TopUpPending';
  }
}

const str = (v: unknown) => (typeof v === 'string' && v ? v : null);

/**
 * Marks the charge as started, with the card it goes to (a concurrent run's, if it marked it
 * first), in one transaction with a check that auto top-up is still enabled: a buyer who turned it
 * off after this run read the settings is never charged (D34). 'disabled' when it was turned off;
 * null when the session is no longer open.
 */
async function startCharge(id: string, orgId: string, pm: string): Promise<string | 'disabled' | null> {
  const tx = new Tx();
  // Idempotent (if_not_exists, only while open): a concurrent run's transaction is retried by commit.
  tx.update('checkout_session', keys.checkoutSession(id), 'SET charge_payment_method = if_not_exists(charge_payment_method, :pm), charge_started_at = if_not_exists(charge_started_at, :t)', {
    condition: '#s = :open',
    names: { '#s': 'status' },
    values: { ':pm': pm, ':t': nowIso(), ':open': 'open' },
  });
  tx.check('settings', keys.settings(orgId), { condition: 'auto_top_up_enabled = :on', values: { ':on': true } });
  try {
    await tx.commit();
  } catch (e) {
    if (!(e instanceof ConditionFailed)) throw e;
    if (e.reasons.includes('checkout_session')) return null;
    // Turned off: unless a concurrent run started the charge before (then it is finished).
    const started = str((await getSession(id))?.charge_payment_method);
    return started ?? 'disabled';
  }
  return str((await getSession(id))?.charge_payment_method);
}

async function recordRef(id: string, attribute: 'charged_ref' | 'pending_charge_ref', providerRef: string): Promise<void> {
  // A concurrent run's transaction may hold the session (TransactionConflictException): the write
  // is idempotent (if_not_exists, only while open), so it is tried again rather than failing the run.
  await retryingConflicts(() =>
    db().send(
      new UpdateCommand({
        TableName: tableName(),
        Key: keys.checkoutSession(id),
        UpdateExpression: 'SET #a = if_not_exists(#a, :ref)',
        ConditionExpression: '#s = :open',
        ExpressionAttributeNames: { '#s': 'status', '#a': attribute },
        ExpressionAttributeValues: { ':ref': providerRef, ':open': 'open' },
      }),
    ),
  ).catch((e: Error) => {
    if (e.name !== 'ConditionalCheckFailedException') throw e; // applied meanwhile by a concurrent run
  });
}

/**
 * Auto top-up turned off before any charge started: the session is cancelled, nothing is charged
 * or granted (nothing to announce: the buyer turned it off). A concurrent run that started the
 * charge meanwhile wins; this delivery comes back later to see it applied.
 */
async function cancelTopUp(session: Item, reason: 'disabled'): Promise<null> {
  const tx = new Tx();
  tx.update('checkout_session', keys.checkoutSession(session.id as string), 'SET #s = :cancelled, cancel_reason = :r, cancelled_at = :t', {
    condition: '#s = :open AND attribute_not_exists(charge_payment_method)',
    names: { '#s': 'status' },
    values: { ':cancelled': 'cancelled', ':open': 'open', ':r': reason, ':t': nowIso() },
  });
  audit(tx, {
    orgId: session.org_id as string,
    eventType: 'credits.auto_top_up_cancelled',
    actor: systemContext('auto_top_up').actor,
    env: session.environment as Env,
    resource: { type: 'checkout_session', id: session.id as string },
    requestId: null,
    data: { amount_cents: Number(session.amount_cents), reason },
  });
  try {
    await tx.commit();
  } catch (e) {
    if (!(e instanceof ConditionFailed)) throw e;
    await settledOrRetry(session.id as string);
  }
  logger.info('auto top-up cancelled', { org_id: session.org_id as string, reason });
  return null;
}

/** After losing a race before the charge: done if the session is settled, else come back later. */
async function settledOrRetry(id: string): Promise<void> {
  const now = await getSession(id);
  if (now?.status === 'open') throw new RetryLater(`auto top-up ${id}: a concurrent run started the charge`);
}

/** Creates the event's session, or answers the one a concurrent delivery created first. */
async function openSession(id: string, orgId: string, env: Env, amount: number): Promise<Item> {
  const tx = new Tx();
  const session = addSession(tx, systemContext('auto_top_up').actor, null, {
    id,
    orgId,
    env,
    amount,
    kind: 'auto_top_up',
    provider: env === 'test' ? 'test_mode' : paymentProvider().name,
    checkoutUrl: null,
  });
  try {
    await tx.commit();
    return session;
  } catch (e) {
    if (!(e instanceof ConditionFailed)) throw e;
    const existing = await getSession(id);
    if (!existing) throw e;
    return existing;
  }
}

/**
 * A declined top-up: the session fails, nothing is granted, the organization hears why. Before any
 * charge started (`beforeCharge`), only if none started meanwhile.
 */
async function failTopUp(session: Item, reason: string, providerRef: string | null, opts: { beforeCharge?: boolean } = {}): Promise<ConfirmOutcome> {
  const orgId = session.org_id as string;
  const env = session.environment as Env;
  const amount = Number(session.amount_cents);
  const tx = new Tx();
  tx.update('checkout_session', keys.checkoutSession(session.id as string), 'SET #s = :failed, failure_reason = :r, payment_ref = :ref, failed_at = :t', {
    condition: `#s = :open${opts.beforeCharge ? ' AND attribute_not_exists(charge_payment_method)' : ''}`,
    names: { '#s': 'status' },
    values: { ':failed': 'failed', ':open': 'open', ':r': reason, ':ref': providerRef, ':t': nowIso() },
  });
  emit(tx, { orgId, env, type: 'credits.auto_top_up_failed', data: { amount_cents: amount, reason } });
  audit(tx, {
    orgId,
    eventType: 'credits.auto_top_up_failed',
    actor: { type: 'system', id: `payment_provider:${session.provider as string}` },
    env,
    resource: { type: 'checkout_session', id: session.id as string },
    requestId: null,
    data: { amount_cents: amount, reason, provider_ref: providerRef },
  });
  try {
    await tx.commit();
  } catch (e) {
    // A concurrent delivery of the same crossing got the same answer and recorded it first.
    if (!(e instanceof ConditionFailed)) throw e;
    if (opts.beforeCharge) await settledOrRetry(session.id as string);
  }
  return 'failed';
}

interface StreamImage {
  entity?: { S?: string };
  type?: { S?: string };
  id?: { S?: string };
  org_id?: { S?: string };
  environment?: { S?: string };
}

/**
 * The top-up a message asks for: the INSERT record of a `credits.low_balance` event (the pipe), or
 * `{"kind":"auto_top_up","event_id":"evt_…"}` (an operator's redrive, docs/operations.md), whose
 * event is read from the table.
 */
export async function topUpRequestOf(body: string): Promise<{ orgId: string; env: Env; eventId: string }> {
  const msg = streamRecordOf(jsonBody<{ eventName: string; dynamodb: { NewImage?: StreamImage }; kind: string; event_id: unknown }>(body));
  if (msg?.kind === 'auto_top_up') {
    const ev = typeof msg.event_id === 'string' && isId('event', msg.event_id) ? await getEventItem(msg.event_id) : undefined;
    if (!ev || ev.type !== 'credits.low_balance') throw new PoisonMessage('auto_top_up names no credits.low_balance event');
    return { orgId: ev.org_id as string, env: ev.environment as Env, eventId: ev.id as string };
  }
  const image = msg?.dynamodb?.NewImage;
  const [orgId, env, eventId] = [image?.org_id?.S, image?.environment?.S, image?.id?.S];
  if (msg?.eventName !== 'INSERT' || image?.entity?.S !== 'event' || image.type?.S !== 'credits.low_balance' || !orgId || !eventId || (env !== 'live' && env !== 'test')) {
    throw new PoisonMessage('not the INSERT record of a credits.low_balance event');
  }
  return { orgId, env, eventId };
}

async function getEventItem(id: string): Promise<Item | undefined> {
  return (await db().send(new GetCommand({ TableName: tableName(), Key: keys.event(id), ConsistentRead: true }))).Item;
}
