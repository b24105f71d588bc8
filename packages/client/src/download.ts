/**
 * Parallel, resumable, verified downloads of a job's files. Each file lands as
 * `<out>/<file id>_<original name>`; a file already there whose SHA-256 equals `content_hash` is
 * skipped; the others are fetched into `<name>.part`, hashed while streaming, and renamed only when
 * the hash matches (a mismatch is an IntegrityError, and nothing wrong is left under the final name).
 */
import { createHash } from 'node:crypto';
import { createReadStream, createWriteStream } from 'node:fs';
import { mkdir, rename, rm, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { Readable, Transform } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import type { File } from './index';

export class IntegrityError extends Error {
  override name = 'IntegrityError';
}

export interface DownloadProgress {
  /** Called with byte deltas as data arrives (and whole sizes for skipped files). */
  onBytes?: (n: number) => void;
  onFileDone?: (file: File, outcome: 'downloaded' | 'skipped') => void;
}

export function localName(f: Pick<File, 'id' | 'original_filename'>): string {
  const safe = (f.original_filename || 'file').replace(/[^A-Za-z0-9._-]+/g, '_').replace(/^\.+/, '').slice(0, 100);
  return `${f.id}_${safe || 'file'}`;
}

export async function sha256File(path: string): Promise<string> {
  const h = createHash('sha256');
  await pipeline(createReadStream(path), h);
  return `sha256:${h.digest('hex')}`;
}

async function exists(path: string): Promise<boolean> {
  try {
    await stat(path);
    return true;
  } catch {
    return false;
  }
}

export async function downloadFile(f: File, outDir: string, p: DownloadProgress = {}, fetchImpl: typeof fetch = fetch): Promise<'downloaded' | 'skipped'> {
  const target = join(outDir, localName(f));
  if ((await exists(target)) && (await sha256File(target)) === f.content_hash) {
    p.onBytes?.(f.size_bytes);
    p.onFileDone?.(f, 'skipped');
    return 'skipped';
  }
  const part = `${target}.part`;
  const res = await fetchImpl(f.download_url);
  if (!res.ok || !res.body) throw new Error(`download of ${f.id} answered HTTP ${res.status}`);
  const hash = createHash('sha256');
  const meter = new Transform({
    transform(chunk: Buffer, _enc, cb) {
      hash.update(chunk);
      p.onBytes?.(chunk.length);
      cb(null, chunk);
    },
  });
  await pipeline(Readable.fromWeb(res.body as import('node:stream/web').ReadableStream), meter, createWriteStream(part));
  const got = `sha256:${hash.digest('hex')}`;
  if (got !== f.content_hash) {
    await rm(part, { force: true });
    throw new IntegrityError(`${f.id}: downloaded bytes hash to ${got}, expected ${f.content_hash}`);
  }
  await rename(part, target);
  p.onFileDone?.(f, 'downloaded');
  return 'downloaded';
}

/** Runs `work` over `items` with at most `concurrency` at a time; the first failure stops new work. */
export async function parallel<T>(items: T[], concurrency: number, work: (item: T) => Promise<void>): Promise<void> {
  // NaN or 0 lanes would run nothing and still resolve, as if every item were done.
  if (!(Number.isInteger(concurrency) && concurrency >= 1)) throw new RangeError(`concurrency must be a whole number, 1 or more (got ${String(concurrency)})`);
  let next = 0;
  let failed: unknown = null;
  const lanes = Array.from({ length: Math.max(1, Math.min(concurrency, items.length)) }, async () => {
    while (failed === null && next < items.length) {
      const item = items[next++]!;
      try {
        await work(item);
      } catch (err) {
        failed ??= err;
      }
    }
  });
  await Promise.all(lanes);
  if (failed !== null) throw failed;
}

export async function ensureDir(dir: string): Promise<void> {
  await mkdir(dir, { recursive: true });
}
