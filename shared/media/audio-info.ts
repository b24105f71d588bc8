/**
 * Audio format fields of a file (duration_seconds, channels, sample_rate, codec, bit rate) read
 * with music-metadata, loaded on first use. Never throws: what it cannot read stays null, for
 * ffprobe to fill (./probe-fields).
 */
import path from 'node:path';
import { findPackageDir } from './native';

type MusicMetadata = typeof import('music-metadata');
let mmPromise: Promise<MusicMetadata> | undefined;

/**
 * music-metadata 11 is ESM-only. `import()` works in Node, tsx and esbuild bundles; Jest's CommonJS
 * sandbox cannot resolve it (its exports have no `require` condition), so we fall back to Node's
 * own loader, which loads ESM synchronously since Node 20.19 (require(esm)). Loaded on first use only.
 */
function loadMusicMetadata(): Promise<MusicMetadata> {
  mmPromise ??= (async () => {
    try {
      return await import('music-metadata');
    } catch (err) {
      const dir = findPackageDir('music-metadata');
      if (!dir) throw err;
      // eslint-disable-next-line @typescript-eslint/no-require-imports
      const Module = require('node:module') as { _load: (request: string, parent: unknown, isMain: boolean) => MusicMetadata };
      return Module._load(path.join(dir, 'lib', 'index.js'), null, false);
    }
  })();
  return mmPromise;
}

export interface AudioInfo {
  duration_seconds: number | null;
  channels: number | null;
  sample_rate: number | null;
  codec: string | null;
  bit_rate: number | null;
}

export async function readAudioInfo(input: Buffer | string, contentType: string): Promise<AudioInfo> {
  const out: AudioInfo = { duration_seconds: null, channels: null, sample_rate: null, codec: null, bit_rate: null };
  try {
    const mm = await loadMusicMetadata();
    const meta =
      typeof input === 'string'
        ? await mm.parseFile(input, { duration: true, skipCovers: true })
        : await mm.parseBuffer(input, { mimeType: contentType, size: input.length }, { duration: true, skipCovers: true });
    const f = meta.format;
    out.duration_seconds = f.duration !== undefined && Number.isFinite(f.duration) ? round3(f.duration) : null;
    out.channels = f.numberOfChannels ?? null;
    out.sample_rate = f.sampleRate ?? null;
    out.codec = f.codec ?? null;
    out.bit_rate = f.bitrate ? Math.round(f.bitrate) : null;
  } catch {
    /* ffprobe below */
  }
  return out;
}

const round3 = (n: number) => Math.round(n * 1000) / 1000;
