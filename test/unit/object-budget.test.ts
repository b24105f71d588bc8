import { ByteBudget, giveUpAt, withInvocationTime } from '../../shared/work/object-budget';
import { RetryLater } from '../../shared/work/stage-message';

// A consumer runs its batch's records in parallel; the objects they hold in memory (and in /tmp)
// must fit the function together, or Lambda stops the whole batch. The budget lets runs whose
// objects fit go together and makes the others wait, in arrival order.
describe('pipeline object budget', () => {
  const MB = 1024 * 1024;
  /** Runs tasks of the given sizes through one budget; returns the most bytes and runs held at once. */
  async function peak(limit: number, sizes: number[]) {
    const budget = new ByteBudget(limit);
    let running = 0;
    let most = 0;
    let mostBytes = 0;
    const order: number[] = [];
    await Promise.all(
      sizes.map((size, i) =>
        budget.run(size, async () => {
          order.push(i);
          most = Math.max(most, ++running);
          mostBytes = Math.max(mostBytes, budget.inUse);
          await new Promise((r) => setTimeout(r, 20));
          running--;
        }),
      ),
    );
    return { most, mostBytes, order, left: budget.inUse };
  }

  it('small objects run together', async () => {
    expect((await peak(256 * MB, [25 * MB, 25 * MB, 25 * MB, 25 * MB, 25 * MB])).most).toBe(5);
  });

  it('objects that do not fit together run one after another, never above the budget', async () => {
    const r = await peak(256 * MB, [250 * MB, 250 * MB, 200 * MB]);
    expect(r.most).toBe(1);
    expect(r.mostBytes).toBeLessThanOrEqual(256 * MB);
    expect(r.left).toBe(0);
  });

  it('an object larger than the whole budget runs alone rather than never', async () => {
    const r = await peak(256 * MB, [300 * MB, 1 * MB]);
    expect(r).toMatchObject({ most: 1, order: [0, 1], left: 0 });
  });

  it('a waiting large object is not overtaken by later small ones', async () => {
    const r = await peak(256 * MB, [200 * MB, 200 * MB, 1 * MB]);
    expect(r.order).toEqual([0, 1, 2]);
  });

  it('a run that fails frees its bytes', async () => {
    const budget = new ByteBudget(10);
    await expect(budget.run(8, async () => { throw new Error('boom'); })).rejects.toThrow('boom');
    expect(budget.inUse).toBe(0);
    await expect(budget.run(8, async () => 'ok')).resolves.toBe('ok');
  });

  it('a run still waiting when too little of its invocation is left is handed back (RetryLater), not left to time the batch out', async () => {
    const budget = new ByteBudget(10);
    let release!: () => void;
    const holding = budget.run(10, () => new Promise<void>((r) => (release = r)));
    const waiting = budget.run(5, async () => 'ran', Date.now() + 30);
    await expect(waiting).rejects.toBeInstanceOf(RetryLater);
    expect(budget.inUse).toBe(10);
    release();
    await holding;
    expect(budget.inUse).toBe(0);
    await expect(budget.run(5, async () => 'ran', Date.now() + 30)).resolves.toBe('ran');
  });

  it('an invocation stops waiting once less than 40 % of its time is left', () => {
    const before = Date.now();
    const at = withInvocationTime(100_000, () => giveUpAt())!;
    expect(at - before).toBeGreaterThanOrEqual(60_000);
    expect(at - Date.now()).toBeLessThanOrEqual(60_000);
    expect(withInvocationTime(undefined, () => giveUpAt())).toBeUndefined();
    expect(giveUpAt()).toBeUndefined();
  });
});
