/**
 * Annotation on the local runtime (offline models, D51/D55): model start-up, then warm time per
 * image (the packaged samples + a face photo shipped in @vladmandic/human), per audio file and per
 * video (3 annotated keyframes), with the peak resident memory of the process (rss sampled every
 * 20 ms). Target: an image under ≈ 1.5 s on 2 cores, warm. Then each model alone on the pipeline
 * bench's image (a 640×480 JPEG), as CPU time: what the pipeline's CPU per approved image cannot go
 * below.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';

const ROUNDS = 3;

export const name = 'Annotation (local offline models)';

export async function run(): Promise<string> {
  const { annotateAudio, annotateImage, annotateVideo } = await import('../shared/media/annotate-image');
  const { LocalAnnotationProvider, warmUp, shutdownModels } = await import('../shared/media/annotation');
  const { packageFile } = await import('../shared/media/native');
  const provider = new LocalAnnotationProvider();
  const samples = join(__dirname, '..', 'samples');
  let peak = process.memoryUsage().rss;
  const sampler = setInterval(() => (peak = Math.max(peak, process.memoryUsage().rss)), 20);
  const rssBefore = process.memoryUsage().rss;
  try {
    let t = performance.now();
    await warmUp();
    const startup = performance.now() - t;
    const rssLoaded = process.memoryUsage().rss;

    const items: { label: string; kind: string; fn: () => Promise<unknown> }[] = [
      ...['sample.jpg', 'sample.png', 'sample.webp', 'sample.gif'].map((f) => {
        const b = readFileSync(join(samples, f));
        return { label: f, kind: 'image', fn: () => annotateImage(b, undefined, { provider }) };
      }),
      (() => {
        const b = readFileSync(packageFile('@vladmandic/human', 'assets/samples.jpg'));
        return { label: 'human assets/samples.jpg (faces)', kind: 'image', fn: () => annotateImage(b, undefined, { provider }) };
      })(),
      (() => {
        const b = readFileSync(packageFile('@vladmandic/human', 'assets/screenshot-faceid.jpg'));
        return { label: 'human assets/screenshot-faceid.jpg (text-heavy)', kind: 'image', fn: () => annotateImage(b, undefined, { provider }) };
      })(),
      ...([['sample.mp3', 'audio/mpeg'], ['sample.wav', 'audio/wav'], ['sample.m4a', 'audio/mp4']] as const).map(([f, ct]) => {
        const b = readFileSync(join(samples, f));
        return { label: f, kind: 'audio', fn: () => annotateAudio(b, ct) };
      }),
      ...['sample.mp4', 'sample.mov'].map((f) => {
        const b = readFileSync(join(samples, f));
        return { label: `${f} (12 s 720p, 3 keyframes)`, kind: 'video', fn: () => annotateVideo(b, { provider }) };
      }),
    ];
    const rows: string[] = [];
    for (const it of items) {
      await it.fn(); // first call of this input shape
      const times: number[] = [];
      for (let i = 0; i < ROUNDS; i++) {
        t = performance.now();
        await it.fn();
        times.push(performance.now() - t);
      }
      times.sort((a, b) => a - b);
      rows.push(`| ${it.kind} | ${it.label} | ${times[Math.floor(times.length / 2)]!.toFixed(0)} | ${times[times.length - 1]!.toFixed(0)} |`);
    }
    const models = await eachModelAlone();
    const mb = (n: number) => (n / 2 ** 20).toFixed(0);
    return [
      `Model start-up (human BlazeFace + CenterNet on tfjs WASM, nsfwjs MobileNetV2, one tesseract worker): ${startup.toFixed(0)} ms.`,
      `Warm timings, ${ROUNDS} rounds each after one untimed call, sequential. Peak RSS ${mb(peak)} MB (before loading ${mb(rssBefore)} MB, models loaded ${mb(rssLoaded)} MB).`,
      '',
      '| kind | input | median ms | max ms |',
      '|---|---|---:|---:|',
      ...rows,
      '',
      ...models,
    ].join('\n');
  } finally {
    clearInterval(sampler);
    await shutdownModels();
  }
}

/** Each detector alone on the pipeline bench's image: CPU time of this process (all its threads), median of 5 after one untimed call. */
async function eachModelAlone(): Promise<string[]> {
  const sharp = (await import('sharp')).default;
  const { detailedJpeg } = await import('../test/pipeline/support');
  const { loadHuman, loadNsfw, loadOcr } = await import('../shared/media/annotation/models');
  const { analyzeImage } = await import('../shared/media/image-quality');
  const { DETECT_MAX_SIDE, OCR_MAX_SIDE } = await import('../shared/media/annotation/image');
  const jpeg = await detailedJpeg(10_000);
  const human = (await loadHuman()) as unknown as { tf: any; models: { models: Record<string, any> }; detect(x: unknown): Promise<unknown> };
  const tf = human.tf;
  const nsfw = await loadNsfw();
  const ocr = await loadOcr();
  const { data, info } = await sharp(jpeg).rotate().resize(DETECT_MAX_SIDE, DETECT_MAX_SIDE, { fit: 'inside', withoutEnlargement: true }).removeAlpha().raw().toBuffer({ resolveWithObject: true });
  const png = await sharp(jpeg).rotate().resize(OCR_MAX_SIDE, OCR_MAX_SIDE, { fit: 'inside', withoutEnlargement: true }).png({ compressionLevel: 1 }).toBuffer();
  const x = tf.tensor3d(new Int32Array(data), [info.height, info.width, 3], 'int32');
  const x4 = tf.expandDims(x, 0);
  /** One model's raw inference on an input of its own size (the graph alone, no pre- or post-processing). */
  const inference = (name: string) => async () => {
    const m = human.models.models[name];
    const [, h, w] = m.inputs[0].shape as number[];
    const input = tf.image.resizeBilinear(tf.cast(x4, 'float32'), [h, w]);
    const out = m.execute(input);
    for (const o of Array.isArray(out) ? out : [out]) {
      await o.data();
      o.dispose();
    }
    input.dispose();
  };
  const cases: [string, () => Promise<unknown>][] = [
    ['faces and objects as the annotation runs them (human: BlazeFace + CenterNet, with their pre- and post-processing)', () => human.detect(x4)],
    ['CenterNet (COCO objects) inference alone, 512×512', inference('centernet')],
    ['BlazeFace (faces) inference alone, 256×256', inference('blazeface')],
    ['NSFW (nsfwjs MobileNetV2, 224×224)', () => nsfw.classify(x, 5)],
    ['OCR (tesseract, automatic layout)', () => ocr.recognize(png, {}, { blocks: true, text: false })],
    ['pixel analysis (quality metrics and palette, sharp)', () => analyzeImage(jpeg)],
  ];
  const rows: string[] = [];
  try {
    for (const [label, fn] of cases) {
      await fn();
      const cpu: number[] = [];
      for (let i = 0; i < 5; i++) {
        const c0 = process.cpuUsage();
        await fn();
        const c = process.cpuUsage(c0);
        cpu.push((c.user + c.system) / 1000);
      }
      cpu.sort((a, b) => a - b);
      rows.push(`| ${label} | ${cpu[2]!.toFixed(0)} |`);
    }
  } finally {
    x.dispose();
    x4.dispose();
  }
  return [
    `Each model alone on the pipeline bench's image (a ${info.width}×${info.height} JPEG of ${Math.round(jpeg.length / 1024)} KB), CPU time of this process, median of 5 after one untimed call:`,
    '',
    '| model | CPU ms |',
    '|---|---:|',
    ...rows,
  ];
}
