/**
 * Annotation on the local runtime (offline models, D51/D55): model start-up, then warm time per
 * image (the packaged samples + a face photo shipped in @vladmandic/human), per audio file and per
 * video (3 annotated keyframes), with the peak resident memory of the process (rss sampled every
 * 20 ms). Target: an image under ≈ 1.5 s on 2 cores, warm.
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
    const mb = (n: number) => (n / 2 ** 20).toFixed(0);
    return [
      `Model start-up (human BlazeFace + CenterNet on tfjs WASM, nsfwjs MobileNetV2, one tesseract worker): ${startup.toFixed(0)} ms.`,
      `Warm timings, ${ROUNDS} rounds each after one untimed call, sequential. Peak RSS ${mb(peak)} MB (before loading ${mb(rssBefore)} MB, models loaded ${mb(rssLoaded)} MB).`,
      '',
      '| kind | input | median ms | max ms |',
      '|---|---|---:|---:|',
      ...rows,
    ].join('\n');
  } finally {
    clearInterval(sampler);
    await shutdownModels();
  }
}
