/**
 * The local runtime's model workers: a small pool of worker threads that runs the CPU-heavy image
 * analysis (shared/media/offload.ts: the pixel measurements and the face, object, NSFW and OCR
 * models) for the consumers of this process.
 *
 * Why: deployed, every consumer invocation is a Lambda with a process of its own; locally the HTTP
 * handlers and every consumer invocation share one Node.js process, and tfjs runs on the thread that
 * calls it. Without the pool the models queue on the one event loop while the other cores idle.
 * The consumer code itself (DynamoDB, S3, the injectable clock) stays in the calling thread; only
 * bytes go in and plain measurements come out.
 *
 * - Size: the consumers' concurrency (default the machine's cores). Workers start on demand (a task
 *   goes to the worker with the fewest tasks in flight, a new one while fewer than `size` run) and
 *   load their models on first use, or all at once with `warmUp()`.
 * - Each worker holds its own models (about 230 MB of resident memory each, measured by
 *   bench/pipeline.bench.ts; the old-generation heap is capped at `maxHeapMb`).
 * - A worker that dies (a crash, out of memory, a task past `taskTimeoutMs`) fails its tasks in flight with AnalysisWorkerFailed,
 *   so the consumer invocation fails and its message comes back (after maxReceiveCount: the DLQ);
 *   the next task starts a fresh worker. An error inside a task (bytes that do not decode) is
 *   answered as the same error the in-process call would throw.
 */
import { resolve } from 'node:path';
import type { EventLoopUtilization } from 'node:perf_hooks';
import { Worker } from 'node:worker_threads';
import type { ImageMeasures, ImageQuality } from '../shared/media/image-quality';
import type { Detectors } from '../shared/media/annotation/image';
import type { ImageFacts } from '../shared/media/annotation/types';
import { AnalysisWorkerFailed, type AnalysisTask, type ImageAnalysisOffload } from '../shared/media/offload';
import { isMachineryFailure } from '../shared/media/failures';
import type { WorkerReply, WorkerRequest } from './model-worker';

/**
 * The error a task threw in the worker, as the in-process call would have thrown it: its name,
 * message and code; a machinery failure the code alone does not show (an AWS call's, a nested
 * cause) keeps that reading through its cause, so it is retried, not taken as undecodable bytes.
 */
export function errorOf(e: Extract<WorkerReply, { ok: false }>['error']): Error {
  const err = Object.assign(new Error(e.message), { name: e.name, ...(e.code ? { code: e.code } : {}) });
  if (e.machinery && !isMachineryFailure(err)) err.cause = new AnalysisWorkerFailed(`machinery failure in the model worker: ${e.message}`);
  return err;
}

const WORKER_FILE = resolve(__dirname, 'model-worker.ts');

export interface ModelPoolOptions {
  /** Worker threads at most. */
  size: number;
  /** Old-generation heap cap of each worker, MB (WASM memory and native buffers are outside it). Default 1024. */
  maxHeapMb?: number;
  /**
   * A task running longer than this ends its worker (its tasks fail with AnalysisWorkerFailed), as a
   * Lambda invocation past its timeout is ended. Default: none.
   */
  taskTimeoutMs?: number;
  /** Told when a worker dies. */
  onWorkerExit?: (message: string) => void;
}

interface Pending {
  resolve(value: unknown): void;
  reject(err: Error): void;
  timer?: NodeJS.Timeout;
}

interface Slot {
  index: number;
  worker: Worker;
  pending: Map<number, Pending>;
  error?: Error;
  tid?: number | null;
}

export class ModelWorkerPool implements ImageAnalysisOffload {
  readonly size: number;
  private readonly slots: (Slot | null)[];
  private nextId = 1;
  private stopped = false;
  private crashFaults = new Map<AnalysisTask['kind'], number>();
  /** Workers that died while the pool ran. */
  deaths = 0;
  /** Workers started (a worker that died is replaced on the next task). */
  started = 0;

  constructor(private readonly opts: ModelPoolOptions) {
    this.size = Math.max(1, Math.floor(opts.size));
    this.slots = Array.from({ length: this.size }, () => null);
  }

  analyzeImage(input: Buffer | string, opts: { palette?: boolean }): Promise<ImageQuality | ImageMeasures> {
    return this.run({ kind: 'analyzeImage', input, palette: opts.palette !== false }) as Promise<ImageQuality | ImageMeasures>;
  }

  measureImageFacts(input: Buffer | string, detectors: Detectors, quality?: ImageQuality): Promise<{ facts: ImageFacts; quality: ImageQuality }> {
    return this.run({ kind: 'measureImageFacts', input, detectors, ...(quality ? { quality } : {}) }) as Promise<{ facts: ImageFacts; quality: ImageQuality }>;
  }

  /** Runs one task on the least busy worker (starting one while fewer than `size` run). */
  run(task: AnalysisTask): Promise<unknown> {
    const faults = this.crashFaults.get(task.kind) ?? 0;
    if (faults > 0) this.crashFaults.set(task.kind, faults - 1);
    return this.send(this.pick(), { task, ...(faults > 0 ? { crash: true } : {}) });
  }

  /** Starts every worker and loads its models. */
  async warmUp(): Promise<void> {
    await Promise.all(this.slots.map((_, i) => this.send(this.slots[i] ?? this.spawn(i), { warmUp: true })));
  }

  /** Worker threads running now. */
  get running(): number {
    return this.slots.filter(Boolean).length;
  }

  /** Event-loop utilisation of each running worker since it started (`performance.eventLoopUtilization`), by slot; null where none runs. */
  eventLoopUtilization(): (EventLoopUtilization | null)[] {
    return this.slots.map((s) => s?.worker.performance.eventLoopUtilization() ?? null);
  }

  /** Linux thread ids of the running workers (their JS threads), for reading their CPU time in /proc. */
  threadIds(): number[] {
    return this.slots.flatMap((s) => (s?.tid ? [s.tid] : []));
  }

  /** Fault drill (tests): the next `times` tasks of this kind kill their worker as a native crash would. */
  crashNext(kind: AnalysisTask['kind'], times = 1): void {
    this.crashFaults.set(kind, times);
  }

  /** Terminates the workers; tasks in flight fail with AnalysisWorkerFailed. */
  async stop(): Promise<void> {
    this.stopped = true;
    const slots = this.slots.filter((s): s is Slot => s !== null);
    this.slots.fill(null);
    for (const s of slots) this.failAll(s, new AnalysisWorkerFailed('the model workers were stopped'));
    await Promise.all(slots.map((s) => s.worker.terminate()));
  }

  private pick(): Slot {
    if (this.stopped) throw new AnalysisWorkerFailed('the model workers were stopped');
    let best = -1;
    let load = Infinity;
    for (let i = 0; i < this.slots.length; i++) {
      const n = this.slots[i]?.pending.size ?? 0;
      if (n < load || (n === load && this.slots[i] && !this.slots[best])) {
        best = i;
        load = n;
      }
    }
    return this.slots[best] ?? this.spawn(best);
  }

  private spawn(index: number): Slot {
    // tsx's require hook compiles our TypeScript in the worker (its ESM hooks do not reach worker
    // threads on Node 20), so the worker's code is loaded with require.
    const code = `require(${JSON.stringify(require.resolve('tsx/cjs'))}); require(${JSON.stringify(WORKER_FILE)});`;
    const worker = new Worker(code, { eval: true, execArgv: [], resourceLimits: { maxOldGenerationSizeMb: this.opts.maxHeapMb ?? 1024 } });
    const slot: Slot = { index, worker, pending: new Map() };
    this.slots[index] = slot;
    this.started++;
    worker.on('message', (reply: WorkerReply) => {
      if (reply.id === 0 && reply.ok) slot.tid = (reply.value as { tid: number | null }).tid;
      const p = slot.pending.get(reply.id);
      if (!p) return;
      slot.pending.delete(reply.id);
      clearTimeout(p.timer);
      if (slot.pending.size === 0) worker.unref();
      if (reply.ok) p.resolve(reply.value);
      else p.reject(errorOf(reply.error));
    });
    worker.on('error', (err) => (slot.error = err));
    worker.on('exit', (code) => {
      if (this.slots[index] === slot) this.slots[index] = null;
      if (this.stopped) return;
      this.deaths++;
      const message = `model worker ${index} died (exit code ${code}${slot.error ? `: ${slot.error.message}` : ''})`;
      this.opts.onWorkerExit?.(message);
      this.failAll(slot, new AnalysisWorkerFailed(`${message}; the analysis did not run`));
    });
    // After the listeners: adding the first 'message' listener refs the worker's message port
    // again, so an unref before it left every idle worker keeping the process alive.
    worker.unref();
    return slot;
  }

  private send(slot: Slot, msg: Omit<WorkerRequest, 'id'> & ({ task: AnalysisTask; crash?: boolean } | { warmUp: true })): Promise<unknown> {
    const id = this.nextId++;
    return new Promise((ok, fail) => {
      const pending: Pending = { resolve: ok, reject: fail };
      const limit = this.opts.taskTimeoutMs;
      if (limit && 'task' in msg) {
        pending.timer = setTimeout(() => {
          slot.error = new Error(`a task ran longer than ${limit / 1000} s`);
          void slot.worker.terminate();
        }, limit);
        pending.timer.unref();
      }
      slot.pending.set(id, pending);
      slot.worker.ref();
      slot.worker.postMessage({ ...msg, id } as WorkerRequest);
    });
  }

  private failAll(slot: Slot, err: Error): void {
    const pending = [...slot.pending.values()];
    slot.pending.clear();
    for (const p of pending) {
      clearTimeout(p.timer);
      p.reject(err);
    }
  }
}
