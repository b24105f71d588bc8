/**
 * The offline models, loaded once per process and kept (module-level lazy singletons; a failed
 * load is forgotten so the next call retries). Everything comes from files inside installed npm
 * packages — nothing is fetched (shared/notes/offline-media.md):
 *
 * - faces + COCO objects: @vladmandic/human 3.3.6 (`dist/human.node-wasm.js` by path, its
 *   `exports` map is malformed) on @tensorflow/tfjs 4.22 with the WASM backend. Face detector
 *   BlazeFace (`models/blazeface.json`); object detector CenterNet (`models/centernet.json`, COCO
 *   80 classes — the only object model shipped in the package's `models/`). Node's fetch refuses
 *   `file://`, so while human loads, `file://` model URLs are answered from disk.
 * - NSFW: nsfwjs 4.3.0 MobileNetV2; its model ships as JS modules inside the package
 *   (`dist/models/mobilenet_v2/*.min.js`, base64 weights), loaded with the ESM `core` entry and only
 *   that model's definition (the package index would pull InceptionV3's 30 MB of JS into bundles).
 * - OCR: tesseract.js 7 with @tesseract.js-data/eng `4.0.0_best_int`, one worker thread reused
 *   (`cacheMethod:'none'`, `gzip:true`, LSTM only, page segmentation 3 = automatic).
 *
 * human and nsfwjs share ONE tfjs engine, loaded with Node's own loader (native.ts) so it is the
 * same instance in Jest, tsx and a Lambda; the WASM backend is set once. tfjs inference runs on
 * the JS thread; tesseract runs in its worker thread, sharp in libuv's pool — so the image
 * pipeline's Promise.all overlaps OCR and decoding with the tfjs models.
 */
import { readFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import { nativeRequire, packageFile } from '../native';

/** Minimal shapes of the parts of tfjs / human / nsfwjs / tesseract we use. */
export interface Tensor {
  shape: number[];
  dispose(): void;
}
export interface Tf {
  tensor3d(values: Uint8Array | Int32Array, shape: [number, number, number], dtype?: 'int32'): Tensor;
  expandDims(t: Tensor, axis?: number): Tensor;
  getBackend(): string;
  memory(): { numTensors: number; numBytes: number };
  engine(): { startScope(): void; endScope(): void };
}
interface HumanBox {
  score: number;
  boxScore?: number;
  box: [number, number, number, number];
  boxRaw: [number, number, number, number];
}
export interface HumanObject extends HumanBox {
  label: string;
}
export interface HumanResult {
  face: HumanBox[];
  object: HumanObject[];
  error?: string | null;
}
interface HumanInstance {
  tf: Tf;
  version: string;
  load(): Promise<void>;
  init(): Promise<void>;
  detect(input: Tensor, config?: Record<string, unknown>): Promise<HumanResult>;
}
export interface NsfwPrediction {
  className: 'Drawing' | 'Hentai' | 'Neutral' | 'Porn' | 'Sexy';
  probability: number;
}
/** The NSFW model interface (nsfwjs's `classify`); tests may stand a provider stub behind it. */
export interface NsfwModel {
  classify(img: Tensor, topk?: number): Promise<NsfwPrediction[]>;
}

let nsfwOverride: NsfwModel | null = null;
/** Tests: classify with this instead of nsfwjs (e.g. a stub that scores an image as explicit). */
export function setNsfwModel(model: NsfwModel | null): void {
  nsfwOverride = model;
}
export interface OcrWord {
  text: string;
  confidence: number;
  bbox: { x0: number; y0: number; x1: number; y1: number };
  line?: { text: string; bbox: { x0: number; y0: number; x1: number; y1: number } };
}
interface OcrBlock {
  paragraphs: { lines: { text: string; words: OcrWord[] }[] }[];
}
interface TesseractWorker {
  recognize(image: Buffer, options?: Record<string, unknown>, output?: Record<string, boolean>): Promise<{ data: { text: string; confidence: number; blocks: OcrBlock[] | null } }>;
  setParameters(p: Record<string, string>): Promise<unknown>;
  terminate(): Promise<unknown>;
}

export const HUMAN_VERSION = '3.3.6';
export const NSFWJS_VERSION = '4.3.0';
export const TESSERACT_VERSION = '7.0.0';

/** Human config: only the face detector and the object detector run (D55 thresholds in derive.ts). */
export const HUMAN_CONFIG = {
  backend: 'wasm',
  debug: false,
  async: true,
  warmup: 'none',
  cacheModels: false,
  cacheSensitivity: 0, // every call analyses its own input (no frame-to-frame result reuse)
  skipAllowed: false,
  filter: { enabled: false },
  gesture: { enabled: false },
  face: {
    enabled: true,
    detector: { modelPath: 'blazeface.json', rotation: false, maxDetected: 50, minConfidence: 0.3, skipFrames: 0, skipTime: 0, return: false },
    mesh: { enabled: false },
    attention: { enabled: false },
    iris: { enabled: false },
    emotion: { enabled: false },
    description: { enabled: false },
    antispoof: { enabled: false },
    liveness: { enabled: false },
  },
  body: { enabled: false },
  hand: { enabled: false },
  object: { enabled: true, modelPath: 'centernet.json', minConfidence: 0.3, iouThreshold: 0.4, maxDetected: 20, skipFrames: 0, skipTime: 0 },
  segmentation: { enabled: false },
};

let humanP: Promise<HumanInstance> | undefined;
let nsfwP: Promise<NsfwModel> | undefined;
let ocrP: Promise<TesseractWorker> | undefined;

function once<T>(get: () => Promise<T> | undefined, set: (p: Promise<T> | undefined) => void, load: () => Promise<T>): Promise<T> {
  let p = get();
  if (!p) {
    p = load();
    set(p);
    p.catch(() => set(undefined));
  }
  return p;
}

/**
 * Answer `file://` URLs from disk while `fn` runs (human fetches its model JSON and weights with
 * the global fetch). `g` is the global object human sees: under Jest that is Node's own, not the
 * sandbox's, so it is taken from a function of the natively loaded module.
 */
async function withFileFetch<T>(g: typeof globalThis, fn: () => Promise<T>): Promise<T> {
  const orig = g.fetch;
  g.fetch = (async (input: string | URL | Request, init?: RequestInit) => {
    const url = typeof input === 'string' ? input : input instanceof URL ? input.href : input.url;
    if (!url.startsWith('file://')) return orig(input, init);
    const body = await readFile(fileURLToPath(url));
    return new Response(body, { status: 200, headers: { 'content-type': url.endsWith('.json') ? 'application/json' : 'application/octet-stream' } });
  }) as typeof fetch;
  try {
    return await fn();
  } finally {
    g.fetch = orig;
  }
}

/** The global object of the context a natively loaded function runs in (Node's own, even under Jest). */
// eslint-disable-next-line @typescript-eslint/no-unsafe-function-type
const globalOf = (fn: Function): typeof globalThis => (fn.constructor as FunctionConstructor)('return globalThis')() as typeof globalThis;

/** Silence the libraries' console.info/log chatter during a load. */
async function quietly<T>(g: typeof globalThis, fn: () => Promise<T>): Promise<T> {
  const c = g.console;
  const { info, log } = c;
  c.info = () => {};
  c.log = () => {};
  try {
    return await fn();
  } finally {
    c.info = info;
    c.log = log;
  }
}

/** human with BlazeFace + CenterNet on the WASM backend (loads the shared tfjs engine). */
export function loadHuman(): Promise<HumanInstance> {
  return once(() => humanP, (p) => (humanP = p), async () => {
    const { Human } = nativeRequire<{ Human: new (cfg: unknown) => HumanInstance }>('@vladmandic/human', 'dist/human.node-wasm.js');
    const modelDir = packageFile('@vladmandic/human', 'models');
    const human = new Human({
      ...HUMAN_CONFIG,
      modelBasePath: `file://${modelDir}/`,
      wasmPath: `${packageFile('@tensorflow/tfjs-backend-wasm', 'dist')}/`,
    });
    const g = globalOf(Human);
    await quietly(g, () => withFileFetch(g, async () => {
      await human.init();
      await human.load();
    }));
    if (human.tf.getBackend() !== 'wasm') throw new Error(`tfjs backend is ${human.tf.getBackend()}, expected wasm`);
    return human;
  });
}

/** nsfwjs MobileNetV2 on the same tfjs engine (human sets the backend first). */
export function loadNsfw(): Promise<NsfwModel> {
  if (nsfwOverride) return Promise.resolve(nsfwOverride);
  return once(() => nsfwP, (p) => (nsfwP = p), async () => {
    await loadHuman();
    const core = nativeRequire<{ load(name: string, opts: unknown): Promise<NsfwModel> }>('nsfwjs', 'dist/esm/core.js');
    const { MobileNetV2Model } = nativeRequire<{ MobileNetV2Model: unknown }>('nsfwjs', 'dist/esm/models/mobilenet_v2.js');
    return quietly(globalOf(core.load), () => core.load('MobileNetV2', { size: 224, modelDefinitions: [MobileNetV2Model] }));
  });
}

/** The tfjs engine human and nsfwjs share. */
export async function tfjs(): Promise<Tf> {
  return (await loadHuman()).tf;
}

/** One tesseract worker for the process (reused; jobs queue inside it). */
export function loadOcr(): Promise<TesseractWorker> {
  return once(() => ocrP, (p) => (ocrP = p), async () => {
    const tesseract = nativeRequire<{ createWorker: (lang: string, oem: number, opts: Record<string, unknown>) => Promise<TesseractWorker>; OEM: { LSTM_ONLY: number } }>(
      'tesseract.js',
      'src/index.js',
    );
    const eng = nativeRequire<{ langPath: string }>('@tesseract.js-data/eng', 'index.js');
    const worker = await tesseract.createWorker('eng', tesseract.OEM.LSTM_ONLY, {
      langPath: eng.langPath.replace(/4\.0\.0$/, '4.0.0_best_int'),
      gzip: true,
      cacheMethod: 'none',
    });
    // PSM 3 (automatic layout): tesseract.js defaults to 6 (one uniform block), which on photos
    // reads texture as text and takes seconds; a fixed DPI silences the "Invalid resolution" warning.
    await worker.setParameters({ tessedit_pageseg_mode: '3', user_defined_dpi: '72' });
    return worker;
  });
}

/** Load every model now (cold start / test beforeAll). */
export async function warmUp(): Promise<void> {
  await Promise.all([loadHuman().then(() => loadNsfw()), loadOcr()]);
}

/** Terminate the OCR worker (lets a test process or a CLI exit); models reload on next use. */
export async function shutdownModels(): Promise<void> {
  const w = ocrP;
  ocrP = undefined;
  if (w) await (await w).terminate().catch(() => undefined);
}
