/**
 * Issue 11.4: concurrent job creations near the end of a balance. Each one either escrows (201),
 * is refused for want of credits (402), or, when contention outlasts the retries, answers 409
 * `conflict` with Retry-After; never a 500. The balance never goes negative and the D31 identities
 * hold afterwards.
 */
import { jobBody, newBuyer, newKey, post, startBillingRuntime, type Buyer } from './billing-support';
import type { TestRuntime } from '../support/harness';
import { Tx, COMMIT_ATTEMPTS, CONTENTION_BUDGET_MS } from '../../shared/db/tx';
import { addEscrow } from '../../shared/ledger/escrow';
import { ConditionFailed, Contention } from '../../shared/errors';
import { cancelTransactionsWhile } from '../support/transaction-conflicts';
import type { BalanceSnapshot } from '../../shared/ledger/balance';
import { db } from '../../shared/db/client';
import { STALE_REBUILD_BUDGET_MS } from '../../shared/db/conflicts';

let rt: TestRuntime & { stopAll(): Promise<void> };
beforeAll(async () => {
  rt = await startBillingRuntime();
});
afterAll(() => rt?.stopAll());

const credits = async (k: string) => (await rt.request('GET', '/v1/billing/credits', { key: k })).json;

async function allTransactions(k: string): Promise<{ type: string; amount_cents: number }[]> {
  const out: { type: string; amount_cents: number }[] = [];
  let cursor: string | null = null;
  do {
    const r: { json: { data: { type: string; amount_cents: number }[]; next_cursor: string | null } } = await rt.request(
      'GET',
      `/v1/billing/transactions?limit=100${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`,
      { key: k },
    );
    out.push(...r.json.data);
    cursor = r.json.next_cursor;
  } while (cursor);
  return out;
}

describe('concurrent job creations at the end of a balance', () => {
  let b: Buyer;
  beforeAll(async () => {
    // 250 starter cents (two lots with the purchase, so draws span lots) + 1000 purchased.
    b = await newBuyer(rt, { purchaseCents: 1000 });
  });

  test('each answers 201, 402 or 409 (never 5xx), and exactly the balance is escrowed', async () => {
    const before = await credits(b.live);
    const cost = 90; // 9 files × 10 cents: the last creations straddle the end of the balance
    const n = 24;
    const results = await Promise.all(
      Array.from({ length: n }, () => post(rt, b.live, '/v1/jobs', jobBody({ files_needed: 9, price_per_file_cents: 10 }))),
    );
    const statuses = results.map((r) => r.status);
    expect(statuses.filter((s) => ![201, 402, 409].includes(s))).toEqual([]);
    for (const r of results.filter((x) => x.status !== 201)) {
      expect(r.json.error.request_id).toBe(r.headers['x-request-id']);
      if (r.status === 409) expect(r.headers['retry-after']).toBeDefined();
      if (r.status === 402) expect(r.json.error.type).toBe('insufficient_credits');
    }
    const created = statuses.filter((s) => s === 201).length;
    const after = await credits(b.live);
    expect(after.available_cents).toBe(before.available_cents - created * cost);
    expect(after.available_cents).toBeGreaterThanOrEqual(0);
    // Nothing left that another creation could have taken, unless it was told to retry (409).
    if (!statuses.includes(409)) expect(after.available_cents).toBeLessThan(cost);
    // D31: available = Σ(purchase, free_tier, bonus, expiration, escrow, refund); held = −Σ(escrow) − …
    const txs = await allTransactions(b.live);
    const sum = (types: string[]) => txs.filter((t) => types.includes(t.type)).reduce((s, t) => s + t.amount_cents, 0);
    expect(after.available_cents).toBe(sum(['purchase', 'free_tier', 'bonus', 'expiration', 'escrow', 'refund']));
    expect(after.held_cents).toBe(-sum(['escrow']) - sum(['refund']) + sum(['deduction']) + sum(['reversal']));
    expect(txs.filter((t) => t.type === 'escrow')).toHaveLength(created);
  });
});

test('a snapshot whose lots no longer hold the amount is stale (re-read), not a fault', () => {
  // The balance read said 100 available; the lots, read a moment later, hold 10.
  const snapshot: BalanceSnapshot = {
    available: 100,
    held: 0,
    version: 3,
    activeJobs: 0,
    updatedAt: null,
    lots: [{ id: 'lot_01ARZ3NDEKTSV4RRFFQ69G5FAV', sk: 'LOT#9999#lot_01ARZ3NDEKTSV4RRFFQ69G5FAV', expiresAt: null, remaining: 10 } as BalanceSnapshot['lots'][number]],
  };
  const run = () =>
    addEscrow(new Tx(), {
      orgId: 'org_01ARZ3NDEKTSV4RRFFQ69G5FAV',
      env: 'live',
      jobId: 'job_01ARZ3NDEKTSV4RRFFQ69G5FAV',
      amount: 90,
      snapshot,
      freeTier: false,
      balanceCondition: { condition: 'available_cents >= :x', values: { ':x': 90 } },
    });
  expect(run).toThrow(ConditionFailed);
});

describe('transaction conflicts that outlast the retries', () => {
  // DynamoDB's own answer when other transactions hold the items, on every attempt while
  // `contended` is on.
  let contended = false;
  let attempts = 0;
  let remove = () => {};
  beforeAll(() => {
    remove = cancelTransactionsWhile(() => contended && ++attempts > 0);
  });
  afterEach(() => {
    contended = false;
  });
  afterAll(() => remove());

  test('Tx.commit retries for its attempts and its time budget, then reports Contention', async () => {
    contended = true;
    attempts = 0;
    const since = Date.now();
    const tx = new Tx().put('x', { PK: 'CONTENTION#x', SK: 'X' });
    await expect(tx.commit()).rejects.toBeInstanceOf(Contention);
    expect(attempts).toBeGreaterThanOrEqual(COMMIT_ATTEMPTS);
    expect(Date.now() - since).toBeGreaterThanOrEqual(CONTENTION_BUDGET_MS);
  });

  test('a job creation under lasting contention answers 409 conflict with Retry-After, not 500', async () => {
    const b = await newBuyer(rt, { verified: false });
    contended = true;
    const r = await post(rt, b.test, '/v1/jobs', jobBody());
    expect(r.status).toBe(409);
    expect(r.json.error).toMatchObject({ type: 'conflict', request_id: r.headers['x-request-id'] });
    expect(r.json.error.details[0].code).toBe('transaction_conflict');
    expect(r.headers['retry-after']).toBe('1');
  });

  test('the same Idempotency-Key retried after a contention 409 runs again instead of replaying the 409', async () => {
    const b = await newBuyer(rt, { verified: false });
    const key = newKey();
    contended = true;
    const first = await post(rt, b.test, '/v1/jobs', jobBody(), key);
    expect(first.status).toBe(409);
    contended = false;
    const again = await post(rt, b.test, '/v1/jobs', jobBody(), key);
    expect(again.status).toBe(201);
    expect(again.headers['idempotent-replayed']).toBeUndefined();
  });
});

describe('a stale balance snapshot (another creation changed the balance first)', () => {
  // The creation's first commit meets a balance that a second creation of the same organization
  // has just lowered past the escrow's condition (the low-balance threshold's regime): its snapshot
  // is stale and a rebuild on a fresh read would escrow. `lateBy` is how long the first round
  // seemingly took (Date.now moved on), as when a round first waits out a contended commit.
  async function staleOnce(lateBy: number): Promise<{ status: number; headers: Record<string, string>; json: any; firstCommit: string }> {
    const b = await newBuyer(rt, { purchaseCents: 1000 });
    const available: number = (await credits(b.live)).available_cents;
    const threshold = 1000; // the settings' default low-balance threshold
    const taken = available - threshold; // leaves exactly the threshold: the first creation's regime no longer holds
    expect(taken % 10).toBe(0);
    const realNow = Date.now.bind(Date);
    let offset = 0;
    const clock = jest.spyOn(Date, 'now').mockImplementation(() => realNow() + offset);
    let interfere = true;
    let firstCommit = 'not sent'; // how the creation's first commit ended
    const name = 'staleBalanceOnce';
    db().middlewareStack.add(
      (next, context) => async (args) => {
        if (interfere && /^TransactWrite(Items)?Command$/.test(String(context.commandName)) && JSON.stringify(args.input).includes(b.orgId)) {
          interfere = false;
          const other = await post(rt, b.live, '/v1/jobs', jobBody({ files_needed: taken / 10, price_per_file_cents: 10 }));
          expect(other.status).toBe(201);
          offset = lateBy;
          try {
            const out = await next(args);
            firstCommit = 'committed';
            return out;
          } catch (e) {
            firstCommit = (e as Error).name;
            throw e;
          }
        }
        return next(args);
      },
      { step: 'initialize', name },
    );
    try {
      const r = await post(rt, b.live, '/v1/jobs', jobBody({ files_needed: 9, price_per_file_cents: 10 }));
      return { ...r, firstCommit };
    } finally {
      db().middlewareStack.remove(name);
      clock.mockRestore();
    }
  }

  test('is read again and the creation escrows, within the stale budget', async () => {
    const r = await staleOnce(0);
    expect(r.status).toBe(201);
    expect(r.firstCommit).toBe('TransactionCanceledException'); // its first round was stale: it escrowed on a fresh read
  });

  test('past the stale budget, the creation answers 409 with Retry-After instead of rebuilding on until its time-out', async () => {
    const r = await staleOnce(STALE_REBUILD_BUDGET_MS + 1);
    expect(r.status).toBe(409);
    expect(r.firstCommit).toBe('TransactionCanceledException');
    expect(r.json.error).toMatchObject({ type: 'conflict', request_id: r.headers['x-request-id'] });
    expect(r.headers['retry-after']).toBe('1');
  });
});
