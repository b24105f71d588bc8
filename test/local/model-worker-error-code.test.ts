import { resolve } from 'node:path';
import { Worker } from 'node:worker_threads';
import { errorOf } from '../../local/model-pool';
import type { WorkerReply, WorkerRequest } from '../../local/model-worker';
import { isMachineryFailure } from '../../shared/media/failures';

// The worker side of the model pool (local/model-worker.ts): an error a task throws in the thread
// goes back with its `code` and a `machinery` reading, so the caller tells a machinery failure
// (retried, D66) from bytes that do not decode (recorded). The pool's reading of such a reply is
// tested in model-workers.test.ts; here the real worker runs, started as the pool starts it (tsx's
// require hook, then the worker file), and answers tasks that throw. No task input makes sharp
// throw an error with a code, so the analysis module is stood in for inside the thread: its
// analyzeImage throws what the task's input names ("fail:<code>:<message>").
const WORKER_FILE = resolve(__dirname, '..', '..', 'local', 'model-worker.ts');
const IMAGE_QUALITY_FILE = resolve(__dirname, '..', '..', 'shared', 'media', 'image-quality.ts');

const STAND_IN = `
const file = require.resolve(${JSON.stringify(IMAGE_QUALITY_FILE)});
require(file);
const m = require.cache[file];
m.exports = {
  ...m.exports,
  analyzeImage: async (input) => {
    const [, code, message] = /^fail:([^:]*):(.*)$/s.exec(String(input));
    throw Object.assign(new Error(message), code ? { code } : {});
  },
};
`;

type Failure = Extract<WorkerReply, { ok: false }>;

describe('local runtime: a model worker thread sends an error’s code and machinery reading to its caller', () => {
  let worker: Worker;
  let nextId = 1;
  const waiting = new Map<number, (reply: WorkerReply) => void>();

  beforeAll(async () => {
    const code = `require(${JSON.stringify(require.resolve('tsx/cjs'))}); ${STAND_IN}; require(${JSON.stringify(WORKER_FILE)});`;
    worker = new Worker(code, { eval: true, execArgv: [] });
    const ready = new Promise<WorkerReply>((ok) => waiting.set(0, ok));
    worker.on('message', (reply: WorkerReply) => {
      waiting.get(reply.id)?.(reply);
      waiting.delete(reply.id);
    });
    worker.on('error', (err) => {
      for (const done of waiting.values()) done({ id: -1, ok: false, error: { name: 'WorkerError', message: err.message, machinery: true } });
    });
    await ready; // the worker's first message: its thread id
  });
  afterAll(async () => {
    await worker?.terminate();
  });

  /** Runs an analyzeImage task in the worker; its reply. */
  const run = (input: string): Promise<WorkerReply> => {
    const id = nextId++;
    const reply = new Promise<WorkerReply>((ok) => waiting.set(id, ok));
    worker.postMessage({ id, task: { kind: 'analyzeImage', input, palette: false } } satisfies WorkerRequest);
    return reply;
  };

  it('a machinery failure in the worker (ENOSPC) reaches the caller with its code and machinery: true, so it is retried', async () => {
    const reply = await run('fail:ENOSPC:ENOSPC: no space left on device, write');
    expect(reply).toEqual({ id: expect.any(Number), ok: false, error: { name: 'Error', message: 'ENOSPC: no space left on device, write', code: 'ENOSPC', machinery: true } });
    const err = errorOf((reply as Failure).error);
    expect(err).toMatchObject({ name: 'Error', message: 'ENOSPC: no space left on device, write', code: 'ENOSPC' });
    expect(isMachineryFailure(err)).toBe(true);
  });

  it('a module that does not load in the worker (MODULE_NOT_FOUND) reaches the caller with its code and machinery: true', async () => {
    const reply = await run("fail:MODULE_NOT_FOUND:Cannot find module '@img/sharp-linux-x64'");
    expect(reply).toMatchObject({ ok: false, error: { code: 'MODULE_NOT_FOUND', machinery: true } });
    const err = errorOf((reply as Failure).error);
    expect(err).toMatchObject({ code: 'MODULE_NOT_FOUND' });
    expect(isMachineryFailure(err)).toBe(true);
  });

  it('a decoder’s error about the bytes (an ERR_… code) reaches the caller with its code and machinery: false, so the file is recorded as undecodable', async () => {
    const reply = await run('fail:ERR_INVALID_ARG_VALUE:Input buffer contains unsupported image format');
    expect(reply).toEqual({ id: expect.any(Number), ok: false, error: { name: 'Error', message: 'Input buffer contains unsupported image format', code: 'ERR_INVALID_ARG_VALUE', machinery: false } });
    const err = errorOf((reply as Failure).error);
    expect(err).toMatchObject({ message: 'Input buffer contains unsupported image format', code: 'ERR_INVALID_ARG_VALUE' });
    expect(isMachineryFailure(err)).toBe(false);
  });

  it('an error without a code reaches the caller without one', async () => {
    const reply = await run('fail::Input file is missing: /nowhere.jpg');
    expect((reply as Failure).error).toEqual({ name: 'Error', message: 'Input file is missing: /nowhere.jpg', machinery: false });
  });
});
