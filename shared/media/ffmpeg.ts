/**
 * Locating and running ffprobe / ffmpeg. Paths come from FFPROBE_PATH / FFMPEG_PATH, else the
 * first executable of that name on PATH (Debian's `ffmpeg` package here; a Lambda layer in AWS).
 * Nothing is downloaded (no ffmpeg-static). Buffers are written to a temporary file, because MP4
 * files whose `moov` sits at the end cannot be probed from a pipe.
 */
import { execFile } from 'node:child_process';
import { accessSync, constants } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';

const located = new Map<string, string | null>();

function locate(name: 'ffprobe' | 'ffmpeg', envVar: string): string | null {
  const fromEnv = process.env[envVar];
  if (fromEnv) return fromEnv;
  if (located.has(name)) return located.get(name)!;
  let found: string | null = null;
  for (const dir of (process.env.PATH ?? '').split(path.delimiter)) {
    if (!dir) continue;
    const candidate = path.join(dir, name);
    try {
      accessSync(candidate, constants.X_OK);
      found = candidate;
      break;
    } catch {
      /* keep looking */
    }
  }
  located.set(name, found);
  return found;
}

export const ffprobePath = (): string | null => locate('ffprobe', 'FFPROBE_PATH');
export const ffmpegPath = (): string | null => locate('ffmpeg', 'FFMPEG_PATH');

export class MediaToolMissingError extends Error {
  constructor(tool: string) {
    super(`${tool} not found: set ${tool.toUpperCase()}_PATH or put ${tool} on PATH`);
    this.name = 'MediaToolMissingError';
  }
}

/**
 * The tool did not finish: killed by a signal (our time-out, or the out-of-memory killer). Says
 * nothing about the bytes (shared/media/failures.ts), unlike a non-zero exit.
 */
export class MediaToolStopped extends Error {
  constructor(tool: string, why: string) {
    super(`${tool} was stopped: ${why}`);
    this.name = 'MediaToolStopped';
  }
}

/**
 * Runs the tool. A non-zero exit rejects with its last stderr lines (the input did not decode); a
 * tool that could not start keeps the system's error code (ENOENT, EACCES…), and one killed by a
 * signal rejects with MediaToolStopped.
 */
export function run(bin: string, args: string[], timeoutMs = 30_000): Promise<{ stdout: Buffer; stderr: string }> {
  const tool = path.basename(bin);
  return new Promise((resolve, reject) => {
    execFile(bin, args, { encoding: 'buffer', timeout: timeoutMs, maxBuffer: 64 * 1024 * 1024 }, (err, stdout, stderr) => {
      if (!err) return resolve({ stdout, stderr: stderr.toString() });
      const e = err as Error & { code?: unknown; killed?: boolean; signal?: NodeJS.Signals | null };
      if (typeof e.code === 'string' && e.code !== 'ERR_CHILD_PROCESS_STDIO_MAXBUFFER') {
        return reject(Object.assign(new Error(`${tool} could not run: ${e.message}`), { code: e.code }));
      }
      if (e.signal) return reject(new MediaToolStopped(tool, e.killed ? `no answer within ${timeoutMs / 1000} s (${e.signal})` : `signal ${e.signal}`));
      const msg = stderr?.toString().trim().split('\n').slice(-3).join(' | ');
      reject(new Error(`${tool} failed: ${msg || e.message}`));
    });
  });
}

/** Run `fn` with a file path for the input: the path itself, or a temporary copy of the buffer. */
export async function withFile<T>(input: Buffer | string, fn: (file: string) => Promise<T>, ext = ''): Promise<T> {
  if (typeof input === 'string') return fn(input);
  const dir = await mkdtemp(path.join(tmpdir(), 'media-'));
  const file = path.join(dir, `input${ext}`);
  try {
    await writeFile(file, input);
    return await fn(file);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

export interface ProbeStream {
  index: number;
  codec_type?: string;
  codec_name?: string;
  width?: number;
  height?: number;
  channels?: number;
  sample_rate?: string;
  avg_frame_rate?: string;
  r_frame_rate?: string;
  duration?: string;
  bit_rate?: string;
  nb_frames?: string;
  tags?: Record<string, string>;
  side_data_list?: Array<Record<string, unknown>>;
  disposition?: Record<string, number>;
}
export interface ProbeResult {
  streams: ProbeStream[];
  format: { format_name?: string; duration?: string; bit_rate?: string; size?: string; tags?: Record<string, string> };
}

/** `ffprobe -show_format -show_streams` as JSON. */
export async function ffprobe(input: Buffer | string): Promise<ProbeResult> {
  const bin = ffprobePath();
  if (!bin) throw new MediaToolMissingError('ffprobe');
  return withFile(input, async (file) => {
    const { stdout } = await run(bin, ['-v', 'error', '-print_format', 'json', '-show_format', '-show_streams', file]);
    const parsed = JSON.parse(stdout.toString('utf8')) as Partial<ProbeResult>;
    return { streams: parsed.streams ?? [], format: parsed.format ?? {} };
  });
}

/** "30000/1001" → 29.97; null for 0/0 or junk. */
export function parseRate(rate: string | undefined): number | null {
  if (!rate) return null;
  const [n, d] = rate.split('/').map(Number);
  if (n === undefined || !Number.isFinite(n)) return null;
  const v = d === undefined ? n : d === 0 ? NaN : n / d;
  return Number.isFinite(v) && v > 0 ? Math.round(v * 1000) / 1000 : null;
}

export const num = (v: string | number | undefined | null): number | null => {
  if (v === undefined || v === null || v === '' || v === 'N/A') return null;
  const n = typeof v === 'number' ? v : Number(v);
  return Number.isFinite(n) ? n : null;
};

/** Run ffmpeg on the input and return its stderr (null when ffmpeg is absent). */
export async function ffmpegStderr(input: Buffer | string, args: (file: string) => string[], timeoutMs = 60_000): Promise<string | null> {
  const bin = ffmpegPath();
  if (!bin) return null;
  return withFile(input, async (file) => (await run(bin, args(file), timeoutMs)).stderr);
}

/** One frame at `seconds` as PNG bytes, scaled to fit maxSide × maxSide (never enlarged). */
export async function extractFrameFromFile(file: string, seconds: number, maxSide: number): Promise<Buffer> {
  const bin = ffmpegPath();
  if (!bin) throw new MediaToolMissingError('ffmpeg');
  const scale = `scale='min(${maxSide},iw)':'min(${maxSide},ih)':force_original_aspect_ratio=decrease`;
  const { stdout } = await run(bin, [
    '-hide_banner', '-loglevel', 'error', '-ss', String(seconds), '-i', file,
    '-frames:v', '1', '-vf', scale, '-f', 'image2pipe', '-vcodec', 'png', 'pipe:1',
  ]);
  if (stdout.length === 0) throw new Error(`ffmpeg produced no frame at ${seconds}s`);
  return stdout;
}
