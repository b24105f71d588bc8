/**
 * Schedules locally: each SCHEDULES entry invokes its handler every `everyMinutes` with an
 * EventBridge "Scheduled Event", skipping a tick while the previous run is still going (deployed
 * a tick cannot find one: every schedule's time-out is below its period). A run that fails is run
 * again `retriesOnFailure` times, one minute and then two minutes later, as Lambda retries an
 * asynchronous invocation; those retries run whatever the ticks are doing, so they can overlap
 * the next tick's run, as deployed. A run
 * that outlives the schedule's `timeoutSeconds` has failed, as when Lambda stops the function: it
 * is logged as timed out and the next tick may start (in-process the old run cannot be stopped,
 * and its result is ignored; deployed, a retry or the next tick can overlap a slow run too, which
 * is why every sweep is idempotent).
 *
 * Each schedule also runs once shortly after start (`firstRunAfterMs`): a deployed stack runs its
 * hourly sweep every hour, but local sessions are often shorter than an hour, and the runs missed
 * while stopped would otherwise wait a whole period (expired credit lots staying spendable).
 */
import { randomUUID } from 'node:crypto';
import type { ScheduledEvent } from 'aws-lambda';
import { SCHEDULES, type ScheduleDef } from '../shared/manifest/wiring';
import { grantedTo, handlerModuleExists, invokeWithTimeout, lambdaContext, loadHandler, LOCAL_ACCOUNT_ID, localRegion } from './lambda';
import type { Log } from './log';

export function scheduledEvent(schedule: Pick<ScheduleDef, 'name'>, at = new Date()): ScheduledEvent {
  const region = localRegion();
  return {
    version: '0',
    id: randomUUID(),
    'detail-type': 'Scheduled Event',
    source: 'aws.events',
    account: LOCAL_ACCOUNT_ID,
    time: at.toISOString().replace(/\.\d{3}Z$/, 'Z'),
    region,
    resources: [`arn:aws:events:${region}:${LOCAL_ACCOUNT_ID}:rule/${schedule.name}`],
    detail: {},
  };
}

export interface Scheduler {
  /** The schedules that run (those whose handler module exists). */
  active: ScheduleDef[];
  stop(): Promise<void>;
}

/** Lambda's waits before the retries of a failed asynchronous invocation. */
export const ASYNC_RETRY_DELAYS_MS = [60_000, 120_000] as const;

export function startScheduler(opts: {
  log: Log;
  schedules?: readonly ScheduleDef[];
  load?: typeof loadHandler;
  firstRunAfterMs?: number;
  /** The waits before each retry of a failed run (tests pass short ones). */
  retryDelaysMs?: readonly number[];
}): Scheduler {
  const retryDelays = opts.retryDelaysMs ?? ASYNC_RETRY_DELAYS_MS;
  const load = opts.load ?? loadHandler;
  const timers: NodeJS.Timeout[] = [];
  const running = new Set<Promise<void>>();
  const stops: (() => void)[] = [];
  const active: ScheduleDef[] = [];
  for (const schedule of opts.schedules ?? SCHEDULES) {
    if (!handlerModuleExists(schedule.handler)) {
      opts.log.warn(`schedule ${schedule.name}: ${schedule.handler} does not exist yet; not scheduled`);
      continue;
    }
    active.push(schedule);
    let busy = false;
    let stopped = false;
    /** One invocation of the event; a failure is retried while retries are left. */
    const invoke = (event: ScheduledEvent, attempt: number): Promise<void> =>
      load(schedule.handler)
        .then((handler) =>
          invokeWithTimeout(
            grantedTo(schedule.name, schedule.access, handler),
            event,
            lambdaContext(schedule.name, schedule.timeoutSeconds),
            schedule.timeoutSeconds * 1000,
          ),
        )
        .then((out) => {
          if ('error' in out) throw out.error;
          opts.log.debug(`schedule ${schedule.name}: done`);
        })
        .catch((err: unknown) => {
          const left = attempt < schedule.retriesOnFailure && !stopped;
          opts.log.error(`schedule ${schedule.name}: failed${left ? `; retried in ${retryDelays[attempt]! / 1000} s` : ''}`, err);
          if (left) retryLater(event, attempt + 1);
        });
    const track = (run: Promise<void>) => {
      running.add(run);
      void run.finally(() => running.delete(run));
    };
    const retryLater = (event: ScheduledEvent, attempt: number) => {
      const timer = setTimeout(() => {
        timers.splice(timers.indexOf(timer), 1);
        track(invoke(event, attempt));
      }, retryDelays[attempt - 1] ?? retryDelays[retryDelays.length - 1]);
      timer.unref();
      timers.push(timer);
    };
    const fire = () => {
      if (busy) return;
      busy = true;
      track(invoke(scheduledEvent(schedule), 0).finally(() => (busy = false)));
    };
    stops.push(() => (stopped = true));
    const timer = setInterval(fire, schedule.everyMinutes * 60_000);
    timer.unref();
    timers.push(timer);
    const first = setTimeout(fire, opts.firstRunAfterMs ?? 10_000);
    first.unref();
    timers.push(first);
  }
  return {
    active,
    async stop() {
      stops.forEach((s) => s());
      timers.forEach(clearInterval);
      await Promise.allSettled([...running]);
    },
  };
}
