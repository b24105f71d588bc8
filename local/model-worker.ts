/**
 * One model worker thread of the local runtime (local/model-pool.ts): runs image analysis tasks
 * (shared/media/offload.ts) with its own copy of the models: tfjs with human and nsfwjs, one
 * tesseract worker, sharp. Loaded by the pool through tsx's require hook, so everything it imports
 * must be reachable with `require` (no dynamic `import()` of our own modules).
 *
 * Messages in: `{ id, task }` (run it), `{ id, warmUp: true }` (load every model now),
 * `{ id, task, crash: true }` (exit at once, as a native crash would: the pool's fault drill).
 * Messages out: `{ id, ok: true, value }` or `{ id, ok: false, error: { name, message } }`; first of
 * all `{ id: 0, ok: true, value: { tid } }`, the thread's id on Linux (else null).
 */
import { readlinkSync } from 'node:fs';
import { parentPort } from 'node:worker_threads';
import { analyzeImage } from '../shared/media/image-quality';
import { measureImageFacts } from '../shared/media/annotation/image';
import { warmUp } from '../shared/media/annotation/models';
import { isMachineryFailure } from '../shared/media/failures';
import type { AnalysisTask } from '../shared/media/offload';

export type WorkerRequest = { id: number; task: AnalysisTask; crash?: boolean } | { id: number; warmUp: true };
/** `code` and `machinery` go along so the caller tells a machinery failure from bytes that do not decode (shared/media/failures.ts). */
export type WorkerReply = { id: number; ok: true; value: unknown } | { id: number; ok: false; error: { name: string; message: string; code?: string; machinery: boolean } };

/** Structured clone turns a Buffer into a plain Uint8Array; sharp wants a Buffer. */
const bytes = (input: Uint8Array | string): Buffer | string => (typeof input === 'string' ? input : Buffer.from(input.buffer, input.byteOffset, input.byteLength));

export function runTask(task: AnalysisTask): Promise<unknown> {
  const input = bytes(task.input);
  if (task.kind === 'analyzeImage') return task.palette ? analyzeImage(input) : analyzeImage(input, { palette: false });
  return measureImageFacts(input, task.detectors, task.quality);
}

const port = parentPort;
if (port) {
  // The kernel's id of this thread (Linux), so a bench can read its CPU time from /proc.
  let tid: number | null = null;
  try {
    tid = Number(readlinkSync('/proc/thread-self').split('/').pop());
  } catch {
    // not Linux
  }
  port.postMessage({ id: 0, ok: true, value: { tid } } satisfies WorkerReply);
  port.on('message', (msg: WorkerRequest) => {
    if ('task' in msg && msg.crash) process.exit(70);
    const work = 'warmUp' in msg ? warmUp() : runTask(msg.task);
    work.then(
      (value) => port.postMessage({ id: msg.id, ok: true, value } satisfies WorkerReply),
      (err: unknown) => {
        const e = err instanceof Error ? err : new Error(String(err));
        const code = (e as { code?: unknown }).code;
        port.postMessage({ id: msg.id, ok: false, error: { name: e.name, message: e.message, ...(typeof code === 'string' ? { code } : {}), machinery: isMachineryFailure(e) } } satisfies WorkerReply);
      },
    );
  });
}
