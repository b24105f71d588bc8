import { readFileSync } from 'node:fs';
import { errorOf, ModelWorkerPool } from '../../local/model-pool';
import { isMachineryFailure } from '../../shared/media/failures';
import { annotateImage } from '../../shared/media/annotate-image';
import { analyzeImage } from '../../shared/media/image-quality';
import { packageFile } from '../../shared/media/native';
import { AnalysisWorkerFailed, imageAnalysisOffload, setImageAnalysisOffload } from '../../shared/media/offload';
import { detailedJpeg } from '../pipeline/support';
import { startTestRuntime } from '../support/harness';

// The local runtime runs the image models in worker threads (local/model-pool.ts) so that they use
// the machine's cores as separate Lambda invocations would; what they answer must not change.
describe('local runtime: model worker threads', () => {
  let pool: ModelWorkerPool;
  beforeAll(() => {
    pool = new ModelWorkerPool({ size: 2 });
  });
  afterEach(() => setImageAnalysisOffload(null));
  afterAll(async () => {
    setImageAnalysisOffload(null);
    await pool?.stop();
  });

  const viaPool = async <T>(fn: () => Promise<T>): Promise<T> => {
    setImageAnalysisOffload(pool);
    try {
      return await fn();
    } finally {
      setImageAnalysisOffload(null);
    }
  };

  it('a worker gives the same annotations as the models in this thread (faces, objects, OCR, NSFW, palette)', async () => {
    const sample = readFileSync(packageFile('@vladmandic/human', 'assets/samples.jpg'));
    const here = await annotateImage(sample);
    const there = await viaPool(() => annotateImage(sample));
    expect(here.face_count).toBeGreaterThan(0); // the sample really exercises the detectors
    expect(there).toEqual(here);
    expect(pool.running).toBeGreaterThan(0);
  });

  it('the scorer’s pixel analysis is the same in a worker', async () => {
    const bytes = await detailedJpeg(31);
    const { elapsed_ms: _a, ...here } = await analyzeImage(bytes, { palette: false });
    const { elapsed_ms: _b, ...there } = await viaPool(() => analyzeImage(bytes, { palette: false }));
    expect(there).toEqual(here);
  });

  it('bytes that do not decode fail as they do in this thread, not as a worker failure', async () => {
    const junk = Buffer.from('not an image at all');
    const here = await analyzeImage(junk).then(() => null, (e: Error) => e);
    const there = await viaPool(() => analyzeImage(junk)).then(() => null, (e: Error) => e);
    expect(here).toBeInstanceOf(Error);
    expect(there).not.toBeInstanceOf(AnalysisWorkerFailed);
    expect(there?.message).toBe(here?.message);
  });

  it('a machinery failure inside a worker (ENOMEM, a module that does not load, an AWS call) stays one, so it is retried, never taken for undecodable bytes', () => {
    expect(isMachineryFailure(errorOf({ name: 'Error', message: 'Cannot allocate memory', code: 'ENOMEM', machinery: true }))).toBe(true);
    expect(isMachineryFailure(errorOf({ name: 'Error', message: "Cannot find module 'x'", code: 'MODULE_NOT_FOUND', machinery: true }))).toBe(true);
    expect(isMachineryFailure(errorOf({ name: 'S3ServiceException', message: 'SlowDown', machinery: true }))).toBe(true);
    const bytes = errorOf({ name: 'Error', message: 'Input buffer contains unsupported image format', code: 'ERR_INVALID_ARG_VALUE', machinery: false });
    expect(isMachineryFailure(bytes)).toBe(false);
    expect(bytes).toMatchObject({ name: 'Error', message: 'Input buffer contains unsupported image format', code: 'ERR_INVALID_ARG_VALUE' });
  });

  it('a worker that dies fails its task with AnalysisWorkerFailed; the next task runs on a fresh worker', async () => {
    const bytes = await detailedJpeg(32);
    const deaths = pool.deaths;
    pool.crashNext('measureImageFacts');
    const err = await viaPool(() => annotateImage(bytes)).then(() => null, (e: Error) => e);
    expect(err).toBeInstanceOf(AnalysisWorkerFailed);
    expect(err?.message).toMatch(/model worker \d died \(exit code 70\)/);
    expect(pool.deaths).toBe(deaths + 1);
    const again = await viaPool(() => annotateImage(bytes));
    expect(again).toMatchObject({ type: 'image', width: 640, height: 480 });
  });

  it('a task past the time limit ends its worker, as Lambda ends an invocation past its timeout', async () => {
    const slow = new ModelWorkerPool({ size: 1, taskTimeoutMs: 50 }); // a fresh worker first loads the models: far longer
    try {
      const err = await slow.measureImageFacts(await detailedJpeg(33), {}).then(() => null, (e: Error) => e);
      expect(err).toBeInstanceOf(AnalysisWorkerFailed);
      expect(err?.message).toMatch(/a task ran longer than 0\.05 s/);
      expect(slow.deaths).toBe(1);
    } finally {
      await slow.stop();
    }
  });

  it('the runtime starts one model worker per consumer slot unless told otherwise, and stops them with itself', async () => {
    const rt = await startTestRuntime({ modelWorkers: undefined, consumerConcurrency: 3, enablePollers: false, enableStreams: false });
    try {
      expect(rt.modelWorkers?.size).toBe(3);
      expect(imageAnalysisOffload()).toBe(rt.modelWorkers);
    } finally {
      await rt.stop();
    }
    expect(imageAnalysisOffload()).toBeNull();
  });

  it('a stopped pool refuses work with AnalysisWorkerFailed', async () => {
    const p = new ModelWorkerPool({ size: 1 });
    await p.stop();
    expect(() => p.run({ kind: 'analyzeImage', input: Buffer.alloc(1), palette: false })).toThrow(AnalysisWorkerFailed);
  });
});
