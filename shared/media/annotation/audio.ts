/**
 * Audio measurements with ffmpeg (D55 encodings), for audio files and video sound tracks.
 *
 * - Loudness, one ffmpeg pass with `ebur128=peak=true:framelog=verbose,volumedetect`:
 *   `integrated_lufs` (EBU R128 / ITU-R BS.1770 integrated loudness, LUFS), `loudness_range_lu`
 *   (LRA), `true_peak_dbfs`, and volumedetect's `mean_volume_db` / `max_volume_db` (dBFS).
 *   Silence gives integrated −70 LUFS (the gate's floor) → reported as is.
 * - Noise, from the first 10 minutes decoded to mono 16 kHz PCM: RMS of 32 ms frames (512
 *   samples); `noise_floor_dbfs` = 10th percentile frame RMS (the level between the loud parts);
 *   `floor_flatness` = mean spectral flatness (geometric / arithmetic mean of the power spectrum,
 *   Hann window, 0 tonal … 1 white noise) of the quietest 10 % of frames.
 *   noise_level: floor ≤ −60 dBFS → low; a tonal floor (flatness < 0.25: the quiet frames are
 *   content — a held note, a hum-free tone — not noise) → low; else floor > −35 dBFS → high,
 *   > −50 dBFS → medium, otherwise low.
 * - Speaker count, language, transcript, topics, keywords, emotion, acoustics: no offline speech
 *   model is installed (offline-media.md: none usable), so they are null with the reason in
 *   `unavailable` — never invented.
 */
import { ffmpegPath, MediaToolMissingError, run, withFile } from '../ffmpeg';
import { isMachineryFailure } from '../failures';
import type { NoiseLevel } from '../image-quality';

export interface Loudness {
  integrated_lufs: number | null;
  loudness_range_lu: number | null;
  true_peak_dbfs: number | null;
  mean_volume_db: number | null;
  max_volume_db: number | null;
}

export interface AudioNoise {
  noise_level: NoiseLevel;
  noise_floor_dbfs: number;
  floor_flatness: number;
  analysed_seconds: number;
}

const numOrNull = (s: string | undefined): number | null => {
  if (s === undefined) return null;
  if (/^-?inf$/i.test(s)) return s.startsWith('-') ? -120 : null;
  const n = Number(s);
  return Number.isFinite(n) ? n : null;
};

/** Parse ffmpeg's ebur128 summary + volumedetect lines. */
export function parseLoudness(stderr: string): Loudness {
  const summary = stderr.slice(stderr.lastIndexOf('Summary:'));
  const has = stderr.includes('Summary:');
  return {
    integrated_lufs: has ? numOrNull(/I:\s*(-?[\d.]+|-?inf) LUFS/.exec(summary)?.[1]) : null,
    loudness_range_lu: has ? numOrNull(/LRA:\s*(-?[\d.]+) LU/.exec(summary)?.[1]) : null,
    true_peak_dbfs: has ? numOrNull(/Peak:\s*(-?[\d.]+|-?inf) dBFS/.exec(summary)?.[1]) : null,
    mean_volume_db: numOrNull(/mean_volume:\s*(-?[\d.]+|-?inf) dB/.exec(stderr)?.[1]),
    max_volume_db: numOrNull(/max_volume:\s*(-?[\d.]+|-?inf) dB/.exec(stderr)?.[1]),
  };
}

const none: Loudness = { integrated_lufs: null, loudness_range_lu: null, true_peak_dbfs: null, mean_volume_db: null, max_volume_db: null };

/** EBU R128 loudness + volume of the first audio stream of a file path (ffmpeg missing: MediaToolMissingError, retried). */
export async function loudnessOfFile(file: string): Promise<Loudness> {
  const bin = ffmpegPath();
  if (!bin) throw new MediaToolMissingError('ffmpeg');
  const { stderr } = await run(bin, ['-hide_banner', '-nostats', '-i', file, '-map', '0:a:0', '-af', 'ebur128=peak=true:framelog=verbose,volumedetect', '-f', 'null', '-'], 120_000);
  return parseLoudness(stderr);
}

export const NOISE_SAMPLE_RATE = 16_000;
const FRAME = 512;

/** Mono 16 kHz s16le PCM of the first `seconds` of the first audio stream. */
export async function pcmOfFile(file: string, seconds = 600): Promise<Int16Array> {
  const bin = ffmpegPath();
  if (!bin) throw new Error('ffmpeg not found');
  const { stdout } = await run(bin, ['-hide_banner', '-loglevel', 'error', '-i', file, '-map', '0:a:0', '-t', String(seconds), '-ac', '1', '-ar', String(NOISE_SAMPLE_RATE), '-f', 's16le', 'pipe:1'], 120_000);
  return new Int16Array(stdout.buffer, stdout.byteOffset, Math.floor(stdout.length / 2));
}

/** In-place radix-2 FFT (re, im of length 2^k). */
function fft(re: Float64Array, im: Float64Array): void {
  const n = re.length;
  for (let i = 1, j = 0; i < n; i++) {
    let bit = n >> 1;
    for (; j & bit; bit >>= 1) j ^= bit;
    j ^= bit;
    if (i < j) {
      [re[i], re[j]] = [re[j]!, re[i]!];
      [im[i], im[j]] = [im[j]!, im[i]!];
    }
  }
  for (let len = 2; len <= n; len <<= 1) {
    const ang = (-2 * Math.PI) / len;
    for (let i = 0; i < n; i += len) {
      for (let k = 0; k < len / 2; k++) {
        const wr = Math.cos(ang * k);
        const wi = Math.sin(ang * k);
        const a = i + k;
        const b = a + len / 2;
        const tr = re[b]! * wr - im[b]! * wi;
        const ti = re[b]! * wi + im[b]! * wr;
        re[b] = re[a]! - tr;
        im[b] = im[a]! - ti;
        re[a]! += tr;
        im[a]! += ti;
      }
    }
  }
}

/** Spectral flatness (0..1) of one frame. */
export function spectralFlatness(frame: Int16Array | Float64Array): number {
  const re = new Float64Array(FRAME);
  const im = new Float64Array(FRAME);
  for (let i = 0; i < FRAME && i < frame.length; i++) re[i] = (frame[i]! / 32768) * (0.5 - 0.5 * Math.cos((2 * Math.PI * i) / (FRAME - 1)));
  fft(re, im);
  let logSum = 0;
  let sum = 0;
  const bins = FRAME / 2;
  for (let k = 1; k <= bins; k++) {
    const p = re[k]! * re[k]! + im[k]! * im[k]! + 1e-12;
    logSum += Math.log(p);
    sum += p;
  }
  return Math.exp(logSum / bins) / (sum / bins);
}

export function noiseLevelOfAudio(floorDb: number, flatness: number): NoiseLevel {
  if (floorDb <= -60 || flatness < 0.25) return 'low';
  if (floorDb > -35) return 'high';
  if (floorDb > -50) return 'medium';
  return 'low';
}

/** Noise measurement of PCM samples (rule in the header); null when shorter than one frame. */
export function measureNoise(pcm: Int16Array): AudioNoise | null {
  const frames = Math.floor(pcm.length / FRAME);
  if (frames < 1) return null;
  const rms: { i: number; db: number }[] = [];
  for (let f = 0; f < frames; f++) {
    let sq = 0;
    for (let i = f * FRAME; i < (f + 1) * FRAME; i++) sq += (pcm[i]! / 32768) ** 2;
    const r = Math.sqrt(sq / FRAME);
    rms.push({ i: f, db: r > 0 ? 20 * Math.log10(r) : -120 });
  }
  const sorted = [...rms].sort((a, b) => a.db - b.db);
  const floor = sorted[Math.floor(0.1 * (sorted.length - 1))]!.db;
  const quiet = sorted.slice(0, Math.max(1, Math.ceil(sorted.length * 0.1))).filter((r) => r.db > -90);
  let flat = 0;
  for (const q of quiet) flat += spectralFlatness(pcm.subarray(q.i * FRAME, (q.i + 1) * FRAME));
  const flatness = quiet.length ? flat / quiet.length : 0;
  const r2 = (n: number) => Math.round(n * 100) / 100;
  return {
    noise_level: noiseLevelOfAudio(floor, flatness),
    noise_floor_dbfs: r2(Math.max(-120, floor)),
    floor_flatness: Math.round(flatness * 10000) / 10000,
    analysed_seconds: Math.round(((frames * FRAME) / NOISE_SAMPLE_RATE) * 1000) / 1000,
  };
}

export { SPEECH_UNAVAILABLE } from '../../speech/local';

/** Loudness + noise of a file's first audio stream, both passes concurrently. */
export async function measureAudio(input: Buffer | string): Promise<{ loudness: Loudness; noise: AudioNoise | null; failures: Record<string, string> }> {
  return withFile(input, async (file) => {
    const failures: Record<string, string> = {};
    const [loudness, noise] = await Promise.all([
      // A tool that is missing, was stopped or failed to start fails the step (retried, D66); a
      // failure of the bytes (no decodable audio) is a reason the fields carry.
      loudnessOfFile(file).catch((err: Error) => {
        if (isMachineryFailure(err)) throw err;
        return (failures.loudness = err.message.slice(0, 300)), none;
      }),
      pcmOfFile(file)
        .then(measureNoise)
        .catch((err: Error) => {
          if (isMachineryFailure(err)) throw err;
          return (failures.noise_level = err.message.slice(0, 300)), null;
        }),
    ]);
    return { loudness, noise, failures };
  });
}
