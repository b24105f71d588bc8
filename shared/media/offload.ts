/**
 * Where the CPU-heavy image analysis runs: the pixel measurements (`analyzeImage`, the scorer's and
 * the annotation's) and the detectors (`measureImageFacts`: faces, objects, NSFW on tfjs, OCR).
 *
 * By default both run in this thread, as in a Lambda, where every invocation has a process of its
 * own. The local runtime runs the HTTP API and every consumer invocation in ONE Node.js process;
 * there it sets an offload (local/model-pool.ts: a pool of worker threads, each with its own copy
 * of the models), so the models use the machine's cores the way separate Lambda invocations would
 * instead of queueing on the one event loop. Only bytes in and plain measurements out cross the
 * boundary; the consumer code (DynamoDB, S3, the clock) stays in the calling thread.
 */
import type { ImageMeasures, ImageQuality } from './image-quality';
import type { Detectors } from './annotation/image';
import type { ImageFacts } from './annotation/types';

/** One piece of analysis, as sent to a worker. */
export type AnalysisTask =
  | { kind: 'analyzeImage'; input: Buffer | string; palette: boolean }
  | { kind: 'measureImageFacts'; input: Buffer | string; detectors: Detectors; quality?: ImageQuality };

export interface ImageAnalysisOffload {
  analyzeImage(input: Buffer | string, opts: { palette?: boolean }): Promise<ImageQuality | ImageMeasures>;
  measureImageFacts(input: Buffer | string, detectors: Detectors, quality?: ImageQuality): Promise<{ facts: ImageFacts; quality: ImageQuality }>;
}

/**
 * The analysis did not run because the thread running it died (a crash, out of memory, stopped).
 * Never a verdict on the bytes: the stage must fail so its message comes back (and after
 * maxReceiveCount waits in the dead-letter queue), not record the file as undecodable.
 */
export class AnalysisWorkerFailed extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'AnalysisWorkerFailed';
  }
}

export const isAnalysisWorkerFailure = (err: unknown): err is AnalysisWorkerFailed => err instanceof Error && err.name === 'AnalysisWorkerFailed';

let offload: ImageAnalysisOffload | null = null;

/** Run image analysis through `o` (null: in this thread, the default). */
export function setImageAnalysisOffload(o: ImageAnalysisOffload | null): void {
  offload = o;
}

export function imageAnalysisOffload(): ImageAnalysisOffload | null {
  return offload;
}
