import type { Log } from '../../local/log';
import { ASYNC_RETRY_DELAYS_MS, startScheduler } from '../../local/scheduler';
import type { ScheduleDef } from '../../shared/manifest/wiring';

// Deployed, Lambda stops a scheduled run at the schedule's time-out and the run has failed; the
// local scheduler holds its runs to the same time-out instead of letting them run for ever.
describe('local scheduler: a run is held to its schedule time-out', () => {
  const errors: string[] = [];
  const log: Log = { debug: () => undefined, info: () => undefined, warn: () => undefined, error: (m: string, e?: unknown) => errors.push(`${m} ${(e as Error)?.message ?? ''}`) } as Log;
  // Ticks every 60 ms with a 100 ms time-out (the real schedules tick in minutes).
  const schedule: ScheduleDef = { name: 'test-sweep', description: 'test', everyMinutes: 0.001, timeoutSeconds: 0.1, retriesOnFailure: 0, handler: 'functions/scheduled/reservation-sweep.ts', access: { table: 'write' } };
  const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

  beforeEach(() => errors.splice(0));

  it('a run that outlives its time-out fails as timed out, and a later tick starts a new run', async () => {
    let started = 0;
    const scheduler = startScheduler({ log, schedules: [schedule], load: async () => async () => { started++; await sleep(2_000); } });
    await sleep(600);
    await scheduler.stop();
    expect(errors[0]).toMatch(/schedule test-sweep: failed Task timed out after 0.1 seconds/);
    expect(started).toBeGreaterThanOrEqual(2);
  });

  it('a run within its time-out is done, and ticks never overlap it', async () => {
    let running = 0;
    let most = 0;
    const scheduler = startScheduler({
      log,
      schedules: [schedule],
      load: async () => async () => {
        most = Math.max(most, ++running);
        await sleep(80);
        running--;
      },
    });
    await sleep(600);
    await scheduler.stop();
    expect(errors).toEqual([]);
    expect(most).toBe(1);
  });

  it('a failed run is run again as many times as the schedule says, with the same event, as Lambda retries an asynchronous invocation', async () => {
    const events: string[] = [];
    const hourly: ScheduleDef = { ...schedule, everyMinutes: 60, timeoutSeconds: 5, retriesOnFailure: 2 };
    const scheduler = startScheduler({
      log,
      schedules: [hourly],
      firstRunAfterMs: 10,
      retryDelaysMs: [50, 100],
      load: async () => async (event: { id: string }) => {
        events.push(event.id);
        throw new Error('the table is unreachable');
      },
    });
    await sleep(500);
    await scheduler.stop();
    expect(events).toHaveLength(3);
    expect(new Set(events).size).toBe(1);
    expect(errors).toEqual([
      expect.stringMatching(/failed; retried in 0.05 s the table is unreachable/),
      expect.stringMatching(/failed; retried in 0.1 s the table is unreachable/),
      expect.stringMatching(/failed the table is unreachable/),
    ]);
  });

  it('a schedule without retries waits for its next tick after a failure', async () => {
    let started = 0;
    const hourly: ScheduleDef = { ...schedule, everyMinutes: 60, timeoutSeconds: 5, retriesOnFailure: 0 };
    const scheduler = startScheduler({ log, schedules: [hourly], firstRunAfterMs: 10, retryDelaysMs: [50, 100], load: async () => async () => { started++; throw new Error('no'); } });
    await sleep(400);
    await scheduler.stop();
    expect(started).toBe(1);
  });

  it("Lambda's waits before the retries are one minute, then two", () => {
    expect(ASYNC_RETRY_DELAYS_MS).toEqual([60_000, 120_000]);
  });

  it('each schedule runs once soon after start, not only after its first whole period (a local session is often shorter than an hourly sweep)', async () => {
    let started = 0;
    const hourly: ScheduleDef = { ...schedule, everyMinutes: 60, timeoutSeconds: 5 };
    const scheduler = startScheduler({ log, schedules: [hourly], firstRunAfterMs: 50, load: async () => async () => { started++; } });
    await sleep(300);
    await scheduler.stop();
    expect(started).toBe(1);
  });
});
