/**
 * D31/D33/D71 property tests against DynamoDB Local: random sequences of purchases, free-tier
 * grants, job creations, approvals (through `addApprovalCharges`, the pipeline's function),
 * rejections, buyer overrides in both directions (through `overrideSubmission`, the route's
 * function: reject an approved submission → `reversal`; approve a rejected one → `deduction`),
 * cancels and expiry sweeps, some steps run concurrently. After every step the three D31
 * identities (held including Σ reversal) hold, available never goes below 0, the lots add up to
 * available and the jobs' escrow to held.
 */
import fc from 'fast-check';
import { Tx } from '../../shared/db/tx';
import { newId } from '../../shared/ids';
import { addMs, clock, DAY_MS, now } from '../../shared/clock';
import { ApiError } from '../../shared/errors';
import { createJob, cancelJob, getJobItem } from '../../shared/jobs';
import { createCheckoutSession, confirmCheckout } from '../../shared/billing';
import { grantCredits } from '../../shared/ledger/lots';
import { sweepCreditLots } from '../../shared/ledger/expiry';
import { approve, ctx, ledgerState, listEvents, newBuyer, reject, useFreshTable, useS3Emulator } from './ledger-fixtures';
import { overrideSubmission } from '../../shared/work/override';
import { getSubmissionItem } from '../../shared/work/reservations';
import type { BuyerPrincipal } from '../../shared/types';
import { QueryCommand } from '@aws-sdk/lib-dynamodb';
import { db, tableName } from '../../shared/db/client';
import { indexKeys } from '../../shared/db/keys';

let stopS3: () => Promise<void>;
beforeAll(async () => {
  await useFreshTable();
  stopS3 = await useS3Emulator();
});
afterAll(() => stopS3?.());

type Cmd =
  | { k: 'purchase'; amount: number }
  | { k: 'grant'; amount: number; days: number }
  | { k: 'create'; price: number; files: number }
  | { k: 'approve'; job: number; files: number }
  | { k: 'reject'; job: number; files: number }
  | { k: 'override'; sub: number; decision: 'approve' | 'reject' }
  | { k: 'cancel'; job: number }
  | { k: 'expire'; days: number };

// Weighted so that runs reach approvals and overrides, not only refusals on an empty tenant.
const cmd: fc.Arbitrary<Cmd> = fc.oneof(
  { weight: 2, arbitrary: fc.record({ k: fc.constant('purchase' as const), amount: fc.integer({ min: 1000, max: 30_000 }) }) },
  { weight: 1, arbitrary: fc.record({ k: fc.constant('grant' as const), amount: fc.integer({ min: 1, max: 3000 }), days: fc.integer({ min: 1, max: 60 }) }) },
  { weight: 3, arbitrary: fc.record({ k: fc.constant('create' as const), price: fc.integer({ min: 10, max: 900 }), files: fc.integer({ min: 1, max: 12 }) }) },
  { weight: 4, arbitrary: fc.record({ k: fc.constant('approve' as const), job: fc.nat(), files: fc.integer({ min: 1, max: 3 }) }) },
  { weight: 2, arbitrary: fc.record({ k: fc.constant('reject' as const), job: fc.nat(), files: fc.integer({ min: 1, max: 3 }) }) },
  { weight: 5, arbitrary: fc.record({ k: fc.constant('override' as const), sub: fc.nat(), decision: fc.constantFrom('approve' as const, 'reject' as const) }) },
  { weight: 1, arbitrary: fc.record({ k: fc.constant('cancel' as const), job: fc.nat() }) },
  { weight: 1, arbitrary: fc.record({ k: fc.constant('expire' as const), days: fc.integer({ min: 1, max: 40 }) }) },
);

/** Business refusals (402, 409...) are outcomes; anything else fails the property. */
const outcome = (p: Promise<unknown>) => p.then(() => 'ok', (e) => { if (e instanceof ApiError && e.status < 500) return e.type; throw e; });

/** Business refusals (409 with a code) are outcomes, named by their code. */
const overrideOutcome = (p: Promise<unknown>) =>
  p.then(
    () => 'ok',
    (e) => {
      if (e instanceof ApiError && e.status < 500) return e.details?.[0]?.code ?? e.type;
      throw e;
    },
  );

/** Submissions by the status they were created in: overrides pick from the list they apply to (mostly). */
interface Subs {
  approved: string[];
  rejected: string[];
}

async function run(p: BuyerPrincipal, c: Cmd, jobs: string[], clock: { t: Date }, subs: Subs = { approved: [], rejected: [] }): Promise<string> {
  switch (c.k) {
    case 'purchase': {
      const s = await createCheckoutSession(ctx(), p, c.amount);
      return (await confirmCheckout(s.id, { paymentMethod: 'pm_test', providerRef: s.id })).outcome;
    }
    case 'grant': {
      const tx = new Tx();
      grantCredits(tx, p.orgId, p.env, { type: 'free_tier', amountCents: c.amount, description: 'grant', expiresAt: addMs(clock.t, c.days * DAY_MS).toISOString() });
      await tx.commit();
      return 'ok';
    }
    case 'create': {
      const body = { type: 'data_collection' as const, description: 'Photos of storefronts', files_needed: c.files, accepted_formats: ['image/jpeg'], price_per_file_cents: c.price };
      return outcome(createJob(ctx(), p, body).then((j) => jobs.push(j.id)));
    }
    case 'approve': {
      if (!jobs.length) return 'skip';
      const id = newId('submission');
      const ok = await approve(jobs[c.job % jobs.length]!, id, c.files);
      if (ok) subs.approved.push(id);
      return ok ? 'ok' : 'refused';
    }
    case 'reject': {
      if (!jobs.length) return 'skip';
      const id = newId('submission');
      await reject(jobs[c.job % jobs.length]!, id, c.files);
      subs.rejected.push(id);
      return 'ok';
    }
    case 'override': {
      // Every 5th pick crosses over (approve an approved one, reject a rejected one): invalid_state.
      const list = (c.decision === 'approve') === (c.sub % 5 !== 0) ? subs.rejected : subs.approved;
      if (!list.length) return 'skip';
      const sub = await getSubmissionItem(list[c.sub % list.length]!);
      return overrideOutcome(overrideSubmission(ctx(), sub!, { decision: c.decision, reason_code: 'other' }));
    }
    case 'cancel': {
      if (!jobs.length) return 'skip';
      const job = await getJobItem(jobs[c.job % jobs.length]!);
      return outcome(cancelJob(ctx(), p, job!));
    }
    case 'expire': {
      clock.t = addMs(clock.t, c.days * DAY_MS);
      await sweepCreditLots(clock.t);
      return 'ok';
    }
  }
}

async function expectIdentities(p: BuyerPrincipal, jobs: string[]) {
  const s = await ledgerState(p, jobs);
  expect(s.available).toBe(s.availableFromRows); // D31 identity 1
  expect(s.held).toBe(s.heldFromRows); // D31 identity 2 (total = available + held follows)
  expect(s.available).toBeGreaterThanOrEqual(0);
  expect(s.held).toBeGreaterThanOrEqual(0);
  expect(s.lotsRemaining).toBe(s.available);
  expect(s.escrowOnJobs).toBe(s.held);
  expect(s.negativeLots).toBe(0);
}

const seen: Record<string, number> = {};

test('D31/D71: the identities hold after every step of random purchases, jobs, approvals, rejections, overrides both ways, cancels and expiries, some concurrent', async () => {
  await fc.assert(
    fc.asyncProperty(fc.array(fc.array(cmd, { minLength: 1, maxLength: 3 }), { minLength: 4, maxLength: 14 }), async (steps) => {
      const p = await newBuyer();
      const jobs: string[] = [];
      const subs: Subs = { approved: [], rejected: [] };
      const clock = { t: now() };
      for (const batch of steps) {
        // A batch of more than one command runs concurrently.
        const results = await Promise.all(batch.map((c) => run(p, c, jobs, clock, subs)));
        batch.forEach((c, i) => {
          seen[`${c.k}:${results[i]}`] = (seen[`${c.k}:${results[i]}`] ?? 0) + 1;
          if (c.k === 'override') seen[`override-${c.decision}:${results[i]}`] = (seen[`override-${c.decision}:${results[i]}`] ?? 0) + 1;
        });
        await expectIdentities(p, jobs);
      }
    }),
    {
      numRuns: 20,
      // One fixed run first, so that every money path below is exercised whatever the random runs
      // draw: purchase, creation, approval, rejection, overrides both ways (and a crossed-over one),
      // a creation beyond the balance, cancel and expiry.
      examples: [
        [
          [
            [{ k: 'purchase', amount: 5000 }],
            [{ k: 'create', price: 100, files: 5 }],
            [{ k: 'approve', job: 0, files: 1 }],
            [{ k: 'reject', job: 0, files: 1 }],
            [{ k: 'override', sub: 1, decision: 'approve' }],
            [{ k: 'override', sub: 1, decision: 'reject' }],
            [{ k: 'override', sub: 0, decision: 'approve' }],
            [{ k: 'create', price: 900, files: 12 }],
            [{ k: 'cancel', job: 0 }],
            [{ k: 'expire', days: 10 }],
          ],
        ],
      ],
    },
  );
  // The random runs did exercise the money paths (not only refusals), overrides in both directions included.
  for (const k of ['create:ok', 'approve:ok', 'cancel:ok', 'purchase:paid', 'create:insufficient_credits', 'override:ok', 'override:invalid_state']) {
    expect(seen[k] ?? 0).toBeGreaterThan(0);
  }
  expect(seen['override-approve:ok'] ?? 0).toBeGreaterThan(0);
  expect(seen['override-reject:ok'] ?? 0).toBeGreaterThan(0);
}, 300_000);

test('D33: escrow draws from the lot that expires first', async () => {
  const p = await newBuyer();
  const t = now();
  const tx = new Tx();
  grantCredits(tx, p.orgId, p.env, { type: 'bonus', amountCents: 300, description: 'late', expiresAt: addMs(t, 60 * DAY_MS).toISOString() });
  await tx.commit();
  const tx2 = new Tx();
  grantCredits(tx2, p.orgId, p.env, { type: 'free_tier', amountCents: 200, description: 'early', expiresAt: addMs(t, 10 * DAY_MS).toISOString() });
  await tx2.commit();
  const s = await createCheckoutSession(ctx(), p, 1000);
  await confirmCheckout(s.id, { paymentMethod: 'pm_test', providerRef: s.id });
  const job = await createJob(ctx(), p, { type: 'data_collection', description: 'Photos of storefronts', files_needed: 25, accepted_formats: ['image/png'], price_per_file_cents: 10 });
  const item = await getJobItem(job.id);
  expect(item!.escrow_sources.map((x) => x.cents)).toEqual([200, 50]);
  expect(item!.escrow_sources[0]!.expires_at).toBe(addMs(t, 10 * DAY_MS).toISOString());
});

test('D33: the sweep expires what is left of a lot once, warns once 30 days ahead', async () => {
  const p = await newBuyer();
  const t = now();
  const tx = new Tx();
  grantCredits(tx, p.orgId, p.env, { type: 'free_tier', amountCents: 250, description: 'starter', expiresAt: addMs(t, 40 * DAY_MS).toISOString() });
  await tx.commit();
  await sweepCreditLots(t); // more than 30 days ahead: nothing
  await sweepCreditLots(addMs(t, 15 * DAY_MS));
  await sweepCreditLots(addMs(t, 16 * DAY_MS));
  await sweepCreditLots(addMs(t, 41 * DAY_MS));
  await sweepCreditLots(addMs(t, 42 * DAY_MS));
  const s = await ledgerState(p, []);
  const expirations = s.rows.filter((r) => r.type === 'expiration');
  expect(expirations.map((r) => r.amount_cents)).toEqual([-250]);
  expect(s.available).toBe(0);
  expect((await listEvents(p)).filter((e) => e.startsWith('credits.')).sort()).toEqual(['credits.expired', 'credits.expiring_soon']);
});

test('D33: the scheduled handler sweeps at the injectable clock\'s time', async () => {
  const p = await newBuyer();
  const tx = new Tx();
  grantCredits(tx, p.orgId, p.env, { type: 'bonus', amountCents: 120, description: 'bonus', expiresAt: addMs(now(), DAY_MS).toISOString() });
  await tx.commit();
  clock.advance(2 * DAY_MS);
  try {
    const { handler } = await import('../../functions/scheduled/credit-expiry-sweep');
    await handler({ time: now().toISOString() } as never);
  } finally {
    clock.reset();
  }
  const s = await ledgerState(p, []);
  expect([s.available, s.rows.filter((r) => r.type === 'expiration').map((r) => r.amount_cents)]).toEqual([0, [-120]]);
});

test('cancel rule 2: a cancel that read a test job before an approval committed reads it again, and job.cancelled reports the approvals the job ends with', async () => {
  const p = await newBuyer('test');
  const body = { type: 'data_collection' as const, description: 'Photos of storefronts', files_needed: 3, accepted_formats: ['image/jpeg'], price_per_file_cents: 50 };
  const job = await createJob(ctx(), p, body);
  const stale = (await getJobItem(job.id))!;
  expect(Number(stale.escrow_remaining_cents ?? 0)).toBe(0); // a test job's escrow does not show the approval
  expect(await approve(job.id, newId('submission'), 1)).toBe(true);
  const cancelled = await cancelJob(ctx(), p, stale);
  expect(cancelled).toMatchObject({ status: 'cancelled', files_approved: 1 });
  const events = await db().send(
    new QueryCommand({ TableName: tableName(), IndexName: indexKeys.tenantEvents(p.orgId, p.env).index, KeyConditionExpression: 'GSI1PK = :pk', ExpressionAttributeValues: { ':pk': indexKeys.tenantEvents(p.orgId, p.env).pk } }),
  );
  const data = (events.Items ?? []).filter((e) => e.type === 'job.cancelled').map((e) => (e.envelope as { data: { files_approved: number } }).data.files_approved);
  expect(data).toEqual([1]);
});
