import type { Log } from '../../local/log';
import { startScheduler } from '../../local/scheduler';
import type { ScheduleDef } from '../../shared/manifest/wiring';

// Deployed, Lambda stops a scheduled run at the schedule's time-out and the run has failed; the
// local scheduler holds its runs to the same time-out instead of letting them run for ever.
describe('local scheduler: a run is held to its schedule time-out', () => {
  const errors: string[] = [];
  const log: Log = { debug: () => undefined, info: () => undefined, warn: () => undefined, error: (m: string, e?: unknown) => errors.push(`${m} ${(e as Error)?.message ?? ''}`) } as Log;
  // Ticks every 60 ms with a 100 ms time-out (the real schedules tick in minutes).
  const schedule: ScheduleDef = { name: 'test-sweep', description: 'test', everyMinutes: 0.001, timeoutSeconds: 0.1, handler: 'functions/scheduled/reservation-sweep.ts', access: { table: 'write' } };
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

  it('each schedule runs once soon after start, not only after its first whole period (a local session is often shorter than an hourly sweep)', async () => {
    let started = 0;
    const hourly: ScheduleDef = { ...schedule, everyMinutes: 60, timeoutSeconds: 5 };
    const scheduler = startScheduler({ log, schedules: [hourly], firstRunAfterMs: 50, load: async () => async () => { started++; } });
    await sleep(300);
    await scheduler.stop();
    expect(started).toBe(1);
  });
});
