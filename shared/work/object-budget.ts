/**
 * How many bytes of uploaded objects the pipeline stages of one process hold at once.
 *
 * A stage reads its object into memory (and hands it to ffmpeg through a file in /tmp), and a
 * consumer runs the records of its batch in parallel: five 250 MB videos in one scoring batch
 * would need 1.25 GB of a 1,024 MB function (and of its /tmp), so Lambda would stop the invocation
 * and the whole batch, small files included, would come back until it rests in the DLQ. So each
 * stage run first takes its object's size from this budget, a quarter of the function's memory
 * (Lambda's `AWS_LAMBDA_FUNCTION_MEMORY_SIZE`; 1,024 MB where it is not set, as in the local
 * runtime, whose one process hosts every consumer): runs whose objects fit together go in
 * parallel, the others wait their turn in arrival order, and an object larger than the whole
 * budget runs alone.
 *
 * A record that waits its turn must not push its batch past the consumer's time-out (Lambda would
 * then stop the invocation and the whole batch would come back, its finished records included): a
 * run still waiting when less than 40 % of the invocation's time is left gives up with
 * `RetryLater`, so only that record comes back (a partial batch failure, with the backoff).
 */
import { AsyncLocalStorage } from 'node:async_hooks';
import { RetryLater } from './stage-message';

const DEFAULT_MEMORY_MB = 1024;

export class ByteBudget {
  private used = 0;
  private readonly waiting: { bytes: number; start: () => void }[] = [];

  constructor(readonly limit: number) {}

  /**
   * Runs `fn` once `bytes` (at most the whole budget) are free, and frees them when it ends.
   * `giveUpAt` (epoch ms): still waiting then, it rejects with RetryLater instead.
   */
  async run<T>(bytes: number, fn: () => Promise<T>, giveUpAt?: number): Promise<T> {
    const weight = Math.max(0, Math.min(bytes, this.limit));
    await this.acquire(weight, giveUpAt);
    try {
      return await fn();
    } finally {
      this.used -= weight;
      this.startWaiting();
    }
  }

  /** Bytes held by running calls. */
  get inUse(): number {
    return this.used;
  }

  private acquire(bytes: number, giveUpAt?: number): Promise<void> {
    if (this.waiting.length === 0 && this.used + bytes <= this.limit) {
      this.used += bytes;
      return Promise.resolve();
    }
    return new Promise((resolve, reject) => {
      let timer: NodeJS.Timeout | undefined;
      const entry = {
        bytes,
        start: () => {
          clearTimeout(timer);
          resolve();
        },
      };
      this.waiting.push(entry);
      if (giveUpAt !== undefined) {
        timer = setTimeout(() => {
          const i = this.waiting.indexOf(entry);
          if (i < 0) return; // started meanwhile
          this.waiting.splice(i, 1);
          this.startWaiting(); // a smaller run behind it may fit now
          reject(new RetryLater('too little of the invocation was left to wait for memory; handed back'));
        }, Math.max(0, giveUpAt - Date.now()));
      }
    });
  }

  private startWaiting(): void {
    while (this.waiting.length && this.used + this.waiting[0]!.bytes <= this.limit) {
      const next = this.waiting.shift()!;
      this.used += next.bytes;
      next.start();
    }
  }
}

const waitLimits = new AsyncLocalStorage<number>();

/**
 * Runs one consumer invocation with `remainingMs` of its time left (Lambda's
 * `getRemainingTimeInMillis()`; undefined: no limit): its runs stop waiting for the budget once
 * less than 40 % of that is left.
 */
export function withInvocationTime<T>(remainingMs: number | undefined, fn: () => T): T {
  if (remainingMs === undefined || !Number.isFinite(remainingMs)) return fn();
  return waitLimits.run(Date.now() + 0.6 * remainingMs, fn);
}

/** When a run of the current invocation should stop waiting for the budget (undefined: never). */
export function giveUpAt(): number | undefined {
  return waitLimits.getStore();
}

let shared: ByteBudget | null = null;

/** The process's budget for objects held by the pipeline stages. */
export function objectBudget(): ByteBudget {
  if (!shared) {
    const mb = Number(process.env.AWS_LAMBDA_FUNCTION_MEMORY_SIZE) || DEFAULT_MEMORY_MB;
    shared = new ByteBudget(Math.floor(mb / 4) * 1024 * 1024);
  }
  return shared;
}
