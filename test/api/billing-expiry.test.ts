/**
 * D33 on the local runtime: credits past their expiry are never spent, even in the hour before the
 * sweep writes their `expiration` row. Job creation draws only from lots not yet expired, its 402
 * counts only those, and credit refunded into a lot that has expired meanwhile stays unspendable
 * until the sweep expires it. Time moves with the injectable clock (shared/clock).
 */
import { addMs, clock, DAY_MS, now } from '../../shared/clock';
import { Tx } from '../../shared/db/tx';
import { ConditionFailed } from '../../shared/errors';
import { grantCredits } from '../../shared/ledger/lots';
import { readBalance, readLots } from '../../shared/ledger/balance';
import { addEscrow } from '../../shared/ledger/escrow';
import { sweepCreditLots } from '../../shared/ledger/expiry';
import { getJobItem } from '../../shared/jobs';
import { ledgerState } from '../domain/ledger-fixtures';
import { jobBody, newBuyer, post, startBillingRuntime, type Buyer } from './billing-support';
import { indexesCaughtUp, type TestRuntime } from '../support/harness';

const MINUTE_MS = 60_000;

let rt: TestRuntime & { stopAll(): Promise<void> };
beforeAll(async () => {
  rt = await startBillingRuntime();
});
afterAll(() => rt?.stopAll());
afterEach(() => clock.reset());

const principal = (b: Buyer) => ({ kind: 'api_key' as const, orgId: b.orgId, keyId: 'key_x', env: 'live' as const, scopes: [], previousSecret: false });

/** A bonus lot of `cents` for the buyer's live balance, expiring `inMs` from now. Returns its id. */
async function grantExpiring(b: Buyer, cents: number, inMs: number): Promise<string> {
  const tx = new Tx();
  const { lotId } = grantCredits(tx, b.orgId, 'live', { type: 'bonus', amountCents: cents, description: 'expiring bonus', expiresAt: addMs(now(), inMs).toISOString() });
  await tx.commit();
  return lotId;
}

const lotRemaining = async (b: Buyer, lotId: string) => (await readLots(b.orgId, 'live')).find((l) => l.id === lotId)?.remaining;
const escrowRows = async (b: Buyer) => (await ledgerState(principal(b), [])).rows.filter((r) => r.type === 'escrow');
const job300 = () => jobBody({ files_needed: 15, price_per_file_cents: 20 });

async function expectIdentities(b: Buyer, jobs: string[] = []) {
  const s = await ledgerState(principal(b), jobs);
  expect(s.available).toBe(s.availableFromRows);
  expect(s.held).toBe(s.heldFromRows);
  expect(s.lotsRemaining).toBe(s.available);
  expect(s.escrowOnJobs).toBe(s.held);
}

test('D33: a job created after a lot expired, before the sweep, is refused 402 and draws nothing from the expired lot', async () => {
  const b = await newBuyer(rt, { verified: false }); // no starter credits
  const lot = await grantExpiring(b, 300, DAY_MS);
  clock.advance(2 * DAY_MS);
  const r = await post(rt, b.live, '/v1/jobs', job300());
  expect(r.status).toBe(402);
  expect(r.json.error).toMatchObject({ type: 'insufficient_credits', current_balance_cents: 0, required_cents: 300, shortfall_cents: 300 });
  expect(await lotRemaining(b, lot)).toBe(300);
  expect(await escrowRows(b)).toEqual([]);
  await expectIdentities(b);
});

test('D33/D19: the 402 counts as available only the credits that have not expired', async () => {
  const b = await newBuyer(rt); // 250 starter credits, expiring in 12 months
  await grantExpiring(b, 300, DAY_MS);
  clock.advance(2 * DAY_MS);
  const r = await post(rt, b.live, '/v1/jobs', job300());
  expect(r.status).toBe(402);
  expect(r.json.error).toMatchObject({ current_balance_cents: 250, balance_cents: 250, required_cents: 300, shortfall_cents: 50 });
  expect(r.json.error.message).toContain('300 cents of the balance have expired');
});

test('D33: a job created after a lot expired draws from the unexpired lots only', async () => {
  const b = await newBuyer(rt); // 250 starter credits
  const expired = await grantExpiring(b, 300, DAY_MS); // expires first, so it would be drawn first
  clock.advance(2 * DAY_MS);
  const r = await post(rt, b.live, '/v1/jobs', jobBody({ files_needed: 10, price_per_file_cents: 20 })); // 200
  expect(r.status).toBe(201);
  const job = await getJobItem(r.json.id);
  expect(job!.escrow_sources.map((s) => s.lot_id)).not.toContain(expired);
  expect(job!.escrow_sources.reduce((sum, s) => sum + s.cents, 0)).toBe(200);
  expect(await lotRemaining(b, expired)).toBe(300);
  await expectIdentities(b, [r.json.id]);
});

test('D33: escrow refunded by a cancel into a lot that has expired meanwhile cannot be spent', async () => {
  const b = await newBuyer(rt, { verified: false });
  const lot = await grantExpiring(b, 300, DAY_MS);
  const created = await post(rt, b.live, '/v1/jobs', job300()); // drawn from the lot while it is valid
  expect(created.status).toBe(201);
  clock.advance(2 * DAY_MS);
  expect((await post(rt, b.live, `/v1/jobs/${created.json.id}/cancel`)).status).toBe(200);
  expect(await lotRemaining(b, lot)).toBe(300); // returned to the lot it came from, past its expiry
  const again = await post(rt, b.live, '/v1/jobs', job300());
  expect(again.status).toBe(402);
  expect(again.json.error.current_balance_cents).toBe(0);
  expect(await lotRemaining(b, lot)).toBe(300);
  expect(await escrowRows(b)).toHaveLength(1); // the first job's only
  await expectIdentities(b, [created.json.id]);
});

test('D33: the sweep expires credit refunded into an already expired lot', async () => {
  const b = await newBuyer(rt, { verified: false });
  await grantExpiring(b, 300, DAY_MS);
  const created = await post(rt, b.live, '/v1/jobs', job300());
  clock.advance(2 * DAY_MS);
  await post(rt, b.live, `/v1/jobs/${created.json.id}/cancel`);
  await indexesCaughtUp(); // the sweep is scheduled, well after these writes, and reads an index
  await sweepCreditLots(now());
  const s = await ledgerState(principal(b), [created.json.id]);
  expect(s.rows.filter((r) => r.type === 'expiration').map((r) => r.amount_cents)).toEqual([-300]);
  expect(s.available).toBe(0);
  await expectIdentities(b, [created.json.id]);
});

test('D33: a lot that expires between the read and the commit is not drawn (the draw is conditioned on the lot not having expired)', async () => {
  const b = await newBuyer(rt, { verified: false });
  const lot = await grantExpiring(b, 300, MINUTE_MS);
  const planned = now().toISOString();
  const snapshot = await readBalance(b.orgId, 'live'); // the lot is valid when read and planned
  clock.advance(2 * MINUTE_MS); // … and has expired when the transaction is written
  const tx = new Tx();
  addEscrow(tx, {
    orgId: b.orgId,
    env: 'live',
    jobId: 'job_01ARZ3NDEKTSV4RRFFQ69G5FAV',
    amount: 300,
    snapshot,
    freeTier: false,
    balanceCondition: { condition: 'available_cents >= :amt', values: { ':amt': 300 } },
    at: planned,
  });
  const failed = await tx.commit().then(() => null, (e: unknown) => e);
  expect(failed).toBeInstanceOf(ConditionFailed);
  expect((failed as ConditionFailed).reasons).toContain(`lot:${lot}`);
  expect(await lotRemaining(b, lot)).toBe(300);
  await expectIdentities(b);
});
