/**
 * Generates the sandbox's sample media (D40): one small file per accepted format (D15), with real
 * content (a drawn scene with shapes, gradients, fine texture and text; a two-tone audio clip; a
 * moving test pattern with a tone), checked into `samples/` with `samples/manifest.json` describing
 * each file's measured properties. Run: `npx tsx scripts/generate-samples.ts` (needs ffmpeg).
 *
 * The simulated worker makes every upload's bytes unique without re-encoding (D53), so these files
 * are the only media the sandbox ships.
 */
import { execFileSync } from 'node:child_process';
import { mkdirSync, writeFileSync, statSync, readFileSync, rmSync } from 'node:fs';
import { createHash } from 'node:crypto';
import { join } from 'node:path';
import sharp from 'sharp';

const out = join(__dirname, '..', 'samples');
const ffmpeg = process.env.FFMPEG_PATH ?? 'ffmpeg';
const ffprobe = process.env.FFPROBE_PATH ?? 'ffprobe';

const W = 1600;
const H = 1200;
const DURATION = 12;

/** A seeded generator, so the samples are the same on every run. */
function rng(seed: number): () => number {
  let s = seed >>> 0;
  return () => {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    return s / 2 ** 32;
  };
}

function sceneSvg(): string {
  const r = rng(42);
  const rects = Array.from({ length: 28 }, (_, i) => {
    const x = Math.floor(r() * (W - 200));
    const y = Math.floor(r() * (H - 400)) + 220;
    const hue = (i * 47) % 360;
    return `<rect x="${x}" y="${y}" width="${90 + (i % 5) * 30}" height="${60 + (i % 7) * 20}" rx="8" fill="hsl(${hue},65%,52%)" opacity="0.85"/>`;
  }).join('');
  const circles = Array.from({ length: 18 }, (_, i) => {
    const cx = Math.floor(r() * W);
    const cy = Math.floor(r() * (H - 220)) + 220;
    return `<circle cx="${cx}" cy="${cy}" r="${25 + (i % 6) * 14}" fill="hsl(${(i * 71) % 360},70%,60%)" stroke="#222" stroke-width="3"/>`;
  }).join('');
  return `<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${H}">
    <defs>
      <linearGradient id="sky" x1="0" y1="0" x2="0" y2="1"><stop offset="0" stop-color="#6fa8dc"/><stop offset="1" stop-color="#f6e7c1"/></linearGradient>
      <pattern id="grid" width="16" height="16" patternUnits="userSpaceOnUse"><path d="M16 0H0V16" fill="none" stroke="#00000022" stroke-width="1"/></pattern>
    </defs>
    <rect width="100%" height="100%" fill="url(#sky)"/>
    <rect y="${H * 0.62}" width="100%" height="${H * 0.38}" fill="#5b8c3a"/>
    <rect width="100%" height="100%" fill="url(#grid)"/>
    ${rects}${circles}
    <rect x="${W / 2 - 420}" y="60" width="840" height="120" fill="#ffffff" stroke="#000" stroke-width="4"/>
    <text x="${W / 2}" y="145" font-family="DejaVu Sans, Liberation Sans, sans-serif" font-size="72" font-weight="bold" text-anchor="middle" fill="#111">SANDBOX SAMPLE</text>
  </svg>`;
}

async function images(): Promise<void> {
  // Fine-grained texture on top of the drawn scene, so the image is detailed (not flat).
  const noise = await sharp({ create: { width: W, height: H, channels: 3, noise: { type: 'gaussian', mean: 128, sigma: 28 } } })
    .png()
    .toBuffer();
  const base = await sharp(Buffer.from(sceneSvg()))
    .composite([{ input: noise, blend: 'soft-light' }])
    .png()
    .toBuffer();
  await sharp(base).jpeg({ quality: 82, mozjpeg: true }).toFile(join(out, 'sample.jpg'));
  await sharp(base).png({ compressionLevel: 9, palette: true, quality: 80 }).toFile(join(out, 'sample.png'));
  await sharp(base).webp({ quality: 75 }).toFile(join(out, 'sample.webp'));
  await sharp(base).resize(800, 600).gif().toFile(join(out, 'sample.gif'));
}

function run(args: string[]): void {
  execFileSync(ffmpeg, ['-hide_banner', '-loglevel', 'error', '-y', ...args], { stdio: 'inherit' });
}

function media(): void {
  const tone = `sine=frequency=440:duration=${DURATION}`;
  const tone2 = `sine=frequency=660:duration=${DURATION}`;
  const audioIn = ['-f', 'lavfi', '-i', tone, '-f', 'lavfi', '-i', tone2, '-filter_complex', '[0:a][1:a]amix=inputs=2:duration=first,volume=0.8[a]', '-map', '[a]'];
  run([...audioIn, '-ac', '1', '-ar', '22050', '-c:a', 'libmp3lame', '-b:a', '48k', join(out, 'sample.mp3')]);
  run([...audioIn, '-ac', '1', '-ar', '16000', '-c:a', 'pcm_s16le', join(out, 'sample.wav')]);
  run([...audioIn, '-ac', '1', '-ar', '22050', '-c:a', 'aac', '-b:a', '48k', '-f', 'ipod', join(out, 'sample.m4a')]);
  const videoIn = ['-f', 'lavfi', '-i', `testsrc2=size=1280x720:rate=24:duration=${DURATION}`, '-f', 'lavfi', '-i', tone];
  const h264 = ['-c:v', 'libx264', '-preset', 'veryslow', '-crf', '34', '-pix_fmt', 'yuv420p', '-c:a', 'aac', '-b:a', '32k', '-shortest'];
  run([...videoIn, ...h264, '-movflags', '+faststart', join(out, 'sample.mp4')]);
  run([...videoIn, ...h264, '-f', 'mov', join(out, 'sample.mov')]);
}

function probe(file: string): { duration_seconds: number | null; width: number | null; height: number | null } {
  const j = JSON.parse(
    execFileSync(ffprobe, ['-v', 'error', '-print_format', 'json', '-show_format', '-show_streams', file]).toString(),
  ) as { format: { duration?: string }; streams: { codec_type: string; width?: number; height?: number }[] };
  const v = j.streams.find((s) => s.codec_type === 'video');
  return {
    duration_seconds: j.format.duration ? Math.round(Number(j.format.duration) * 100) / 100 : null,
    width: v?.width ?? null,
    height: v?.height ?? null,
  };
}

async function main(): Promise<void> {
  rmSync(out, { recursive: true, force: true });
  mkdirSync(out, { recursive: true });
  await images();
  media();
  const files = [
    ['sample.jpg', 'image/jpeg'],
    ['sample.png', 'image/png'],
    ['sample.webp', 'image/webp'],
    ['sample.gif', 'image/gif'],
    ['sample.mp3', 'audio/mpeg'],
    ['sample.wav', 'audio/wav'],
    ['sample.m4a', 'audio/mp4'],
    ['sample.mp4', 'video/mp4'],
    ['sample.mov', 'video/quicktime'],
  ] as const;
  const manifest = [];
  for (const [name, contentType] of files) {
    const path = join(out, name);
    const bytes = readFileSync(path);
    let dims: { width: number | null; height: number | null; duration_seconds: number | null };
    if (contentType.startsWith('image/')) {
      const m = await sharp(bytes).metadata();
      dims = { width: m.width ?? null, height: m.height ?? null, duration_seconds: null };
    } else {
      dims = probe(path);
    }
    manifest.push({
      file: name,
      content_type: contentType,
      size_bytes: statSync(path).size,
      ...dims,
      sha256: createHash('sha256').update(bytes).digest('hex'),
    });
  }
  writeFileSync(join(out, 'manifest.json'), JSON.stringify(manifest, null, 2) + '\n');
  console.table(manifest.map(({ sha256: _s, ...m }) => m));
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
