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
 */

const DEFAULT_MEMORY_MB = 1024;

export class ByteBudget {
  private used = 0;
  private readonly waiting: { bytes: number; start: () => void }[] = [];

  constructor(readonly limit: number) {}

  /** Runs `fn` once `bytes` (at most the whole budget) are free, and frees them when it ends. */
  async run<T>(bytes: number, fn: () => Promise<T>): Promise<T> {
    const weight = Math.max(0, Math.min(bytes, this.limit));
    await this.acquire(weight);
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

  private acquire(bytes: number): Promise<void> {
    if (this.waiting.length === 0 && this.used + bytes <= this.limit) {
      this.used += bytes;
      return Promise.resolve();
    }
    return new Promise((resolve) => this.waiting.push({ bytes, start: resolve }));
  }

  private startWaiting(): void {
    while (this.waiting.length && this.used + this.waiting[0]!.bytes <= this.limit) {
      const next = this.waiting.shift()!;
      this.used += next.bytes;
      next.start();
    }
  }
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
