/**
 * Real content type from magic bytes, and the upload checks of D25.
 *
 * Accepted formats (D15): image/jpeg, image/png, image/webp, image/gif, audio/mpeg, audio/wav,
 * audio/mp4 (audio/x-m4a is accepted and stored as audio/mp4), video/mp4, video/quicktime.
 * Size limits (D25 / spec Limits): image 25 MB, audio 50 MB, video 250 MB (MB = 1024 × 1024 bytes).
 *
 * ISO base-media files (MP4 / M4A / MOV) need a rule, because one container carries all three:
 * - `ftyp` major brand `qt  ` → video/quicktime (also a bare QuickTime file starting with a
 *   `moov`/`mdat`/`wide`/`free`/`skip`/`pnot` atom and no `ftyp`).
 * - `ftyp` major brand `M4A ` / `M4B ` / `M4P ` → audio/mp4.
 * - any other `ftyp` brand (isom, mp41, mp42, avc1, iso2…, dash, 3gp…) is the generic MP4 family:
 *   the bytes decide only when the head holds the `moov` box (fast-start files): any `vide`
 *   handler → video/mp4, only `soun` handlers → audio/mp4. When `moov` is not in the head (it is
 *   often written at the end), the generic brand matches either audio/mp4 or video/mp4 as
 *   declared, and `measure()` (metadata.ts) settles it on the whole file with ffprobe
 *   (`mp4Kind` / `has_video`), so a video declared as audio/mp4 is still caught before scoring.
 */
import { errors, type ApiError, type ErrorDetail } from '../errors';

export type MediaCategory = 'image' | 'audio' | 'video';

export const ACCEPTED_CONTENT_TYPES = [
  'image/jpeg',
  'image/png',
  'image/webp',
  'image/gif',
  'audio/mpeg',
  'audio/wav',
  'audio/mp4',
  'video/mp4',
  'video/quicktime',
] as const;
export type AcceptedContentType = (typeof ACCEPTED_CONTENT_TYPES)[number];

const MB = 1024 * 1024;
/** D25: maximum size per category, in bytes. */
export const MAX_SIZE_BYTES: Record<MediaCategory, number> = {
  image: 25 * MB,
  audio: 50 * MB,
  video: 250 * MB,
};

/**
 * Aliases that browsers and phones send for the D15 types. `audio/x-m4a` → `audio/mp4` is D15;
 * the others are the same formats under common non-standard names (documented choice: accepted
 * on upload and stored under the canonical name).
 */
const ALIASES: Record<string, AcceptedContentType> = {
  'audio/x-m4a': 'audio/mp4',
  'audio/m4a': 'audio/mp4',
  'audio/x-wav': 'audio/wav',
  'audio/wave': 'audio/wav',
  'audio/vnd.wave': 'audio/wav',
  'audio/mp3': 'audio/mpeg',
  'image/jpg': 'image/jpeg',
  'image/pjpeg': 'image/jpeg',
};

/** Canonical D15 type for a declared MIME type (case and parameters ignored), or null if unsupported. */
export function normalizeContentType(declared: string | null | undefined): AcceptedContentType | null {
  if (!declared) return null;
  const t = declared.split(';')[0]!.trim().toLowerCase();
  if ((ACCEPTED_CONTENT_TYPES as readonly string[]).includes(t)) return t as AcceptedContentType;
  return ALIASES[t] ?? null;
}

export function categoryOf(contentType: string): MediaCategory | null {
  const t = normalizeContentType(contentType);
  if (!t) return null;
  return t.slice(0, t.indexOf('/')) as MediaCategory;
}

/** What the bytes say. `mp4` = generic ISO-BMFF brand whose audio/video nature the head did not settle. */
export type Sniffed = AcceptedContentType | 'mp4' | null;

const ascii = (b: Uint8Array, start: number, len: number): string => {
  let s = '';
  for (let i = start; i < start + len && i < b.length; i++) s += String.fromCharCode(b[i]!);
  return s;
};
const u32 = (b: Uint8Array, o: number): number => ((b[o]! << 24) >>> 0) + (b[o + 1]! << 16) + (b[o + 2]! << 8) + b[o + 3]!;

/** An MPEG-1/2/2.5 audio frame header (Layer I/II/III) at offset o. ADTS AAC (layer 00) is not MP3. */
function isMpegAudioFrame(b: Uint8Array, o = 0): boolean {
  if (b.length < o + 4) return false;
  if (b[o] !== 0xff || (b[o + 1]! & 0xe0) !== 0xe0) return false;
  const version = (b[o + 1]! >> 3) & 0x03; // 01 reserved
  const layer = (b[o + 1]! >> 1) & 0x03; // 00 reserved (ADTS uses it)
  const bitrate = (b[o + 2]! >> 4) & 0x0f; // 1111 invalid
  const rate = (b[o + 2]! >> 2) & 0x03; // 11 reserved
  return version !== 1 && layer !== 0 && bitrate !== 0x0f && rate !== 3;
}

/** Handler types (`vide`, `soun`, …) of the tracks in a `moov` box found in `b`, or null when no complete `moov` is there. */
export function mp4TrackHandlers(b: Uint8Array): string[] | null {
  const walk = (start: number, end: number, out: string[], depth: number): boolean => {
    let o = start;
    let sawMoov = false;
    while (o + 8 <= end) {
      let size = u32(b, o);
      const type = ascii(b, o + 4, 4);
      let header = 8;
      if (size === 1) {
        if (o + 16 > end) break;
        size = u32(b, o + 8) * 2 ** 32 + u32(b, o + 12);
        header = 16;
      } else if (size === 0) size = end - o;
      if (size < header) break;
      const boxEnd = o + size;
      if (type === 'moov' && depth === 0) {
        if (boxEnd > end) return false; // moov cut off by the head: undecided
        sawMoov = true;
        walk(o + header, boxEnd, out, 1);
      } else if (depth > 0 && (type === 'trak' || type === 'mdia')) {
        walk(o + header, Math.min(boxEnd, end), out, depth + 1);
      } else if (depth > 0 && type === 'hdlr' && o + header + 12 <= end) {
        out.push(ascii(b, o + header + 8, 4)); // version/flags (4), pre_defined (4), handler_type (4)
      }
      if (boxEnd > end) break;
      o = boxEnd;
    }
    return sawMoov;
  };
  const out: string[] = [];
  return walk(0, b.length, out, 0) ? out : null;
}

/**
 * Content type from the first bytes (4 KiB is plenty except for the MP4 `moov` refinement, which
 * uses whatever is given, up to the whole file).
 */
export function sniffContentType(head: Uint8Array): Sniffed {
  const b = head;
  if (b.length < 4) return null;
  if (b[0] === 0xff && b[1] === 0xd8 && b[2] === 0xff) return 'image/jpeg';
  if (ascii(b, 0, 8) === '\x89PNG\r\n\x1a\n') return 'image/png';
  if (ascii(b, 0, 6) === 'GIF87a' || ascii(b, 0, 6) === 'GIF89a') return 'image/gif';
  const riff = ascii(b, 0, 4);
  if ((riff === 'RIFF' || riff === 'RF64' || riff === 'BW64') && b.length >= 12) {
    const form = ascii(b, 8, 4);
    if (form === 'WEBP' && riff === 'RIFF') return 'image/webp';
    if (form === 'WAVE') return 'audio/wav';
    return null;
  }
  if (ascii(b, 0, 3) === 'ID3') return 'audio/mpeg';
  if (isMpegAudioFrame(b, 0)) return 'audio/mpeg';
  if (b.length >= 12) {
    const box = ascii(b, 4, 4);
    if (box === 'ftyp') {
      const major = ascii(b, 8, 4);
      if (major === 'qt  ') return 'video/quicktime';
      if (major === 'M4A ' || major === 'M4B ' || major === 'M4P ') return 'audio/mp4';
      const handlers = mp4TrackHandlers(b);
      if (handlers) {
        if (handlers.includes('vide')) return 'video/mp4';
        if (handlers.includes('soun')) return 'audio/mp4';
      }
      return 'mp4';
    }
    if (['moov', 'mdat', 'wide', 'free', 'skip', 'pnot'].includes(box)) return 'video/quicktime';
  }
  return null;
}

/** Does what the bytes say agree with the declared (canonical) type? */
export function sniffMatches(sniffed: Sniffed, declared: AcceptedContentType): boolean {
  if (sniffed === null) return false;
  if (sniffed === 'mp4') return declared === 'video/mp4' || declared === 'audio/mp4';
  return sniffed === declared;
}

export interface UploadCheckInput {
  /** MIME type sent by the worker (multipart part or pre-signed request). */
  declaredType: string;
  /** The first bytes of the upload (≥ 64 bytes; 4 KiB recommended; more helps MP4). */
  bytesHead: Uint8Array;
  /** Total size in bytes. */
  size: number;
  /** The job's accepted_formats. */
  acceptedFormats: readonly string[];
  /**
   * The whole file, when the caller has it: JPEG and PNG files are then checked for data after
   * their end marker (`trailingDataAfterImage`). Without it that check does not run.
   */
  bytes?: Uint8Array;
}

export type UploadCheckResult =
  | { ok: true; contentType: AcceptedContentType; category: MediaCategory; sniffed: Sniffed }
  | { ok: false; errors: ErrorDetail[]; sniffed: Sniffed };

/**
 * D25 upload checks. Returns every failure found, each an ErrorDetail with `field: 'file'` and
 * `code` `unsupported_format` (declared type not a D15 type or not in the job's accepted_formats),
 * `file_too_large` (size over the category limit) or `content_mismatch` (magic bytes disagree with
 * the declared type). The caller answers 400 `validation_error` with these details (see
 * `uploadCheckError`).
 */
export function checkUpload(input: UploadCheckInput): UploadCheckResult {
  const errors: ErrorDetail[] = [];
  const declared = normalizeContentType(input.declaredType);
  const sniffed = sniffContentType(input.bytesHead);
  const accepted = new Set(input.acceptedFormats.map((f) => normalizeContentType(f)).filter((f) => f !== null));

  if (!declared) {
    errors.push({ field: 'file', code: 'unsupported_format', message: `Content type ${JSON.stringify(input.declaredType)} is not supported.` });
  } else if (!accepted.has(declared)) {
    errors.push({
      field: 'file',
      code: 'unsupported_format',
      message: `Content type ${declared} is not accepted by this job (accepted: ${[...accepted].join(', ')}).`,
    });
  }

  const sniffedCategory: MediaCategory | null = sniffed === 'mp4' ? 'video' : sniffed ? categoryOf(sniffed) : null;
  const category = declared ? categoryOf(declared) : sniffedCategory;
  if (category && input.size > MAX_SIZE_BYTES[category]) {
    errors.push({
      field: 'file',
      code: 'file_too_large',
      message: `File is ${input.size} bytes; the ${category} limit is ${MAX_SIZE_BYTES[category]} bytes (${MAX_SIZE_BYTES[category] / MB} MB).`,
    });
  }

  if (declared && !sniffMatches(sniffed, declared)) {
    errors.push({
      field: 'file',
      code: 'content_mismatch',
      message: sniffed
        ? `File content is ${sniffed === 'mp4' ? 'MP4' : sniffed}, not the declared ${declared}.`
        : `File content is not a recognised ${declared} file.`,
    });
  }

  if (errors.length === 0 && declared && input.bytes) {
    const extra = trailingDataAfterImage(input.bytes, declared);
    if (extra > 0) {
      errors.push({
        field: 'file',
        code: 'content_mismatch',
        message: `File has ${extra} bytes of other data after the end of the image (${declared}); upload the image alone.`,
      });
    }
  }

  if (errors.length > 0 || !declared || !category) return { ok: false, errors, sniffed };
  return { ok: true, contentType: declared, category, sniffed };
}

/** The 400 `validation_error` (D25) for a failed upload check. */
export function uploadCheckError(result: Extract<UploadCheckResult, { ok: false }>): ApiError {
  const first = result.errors[0];
  return errors.validation(first ? first.message : 'The uploaded file was refused.', result.errors);
}

/**
 * Bytes after the end of a JPEG (its EOI marker) or PNG (its IEND chunk), not counting zero
 * padding; 0 when there are none, the type is another one, or the structure cannot be followed
 * (a broken file is left to the decoder). Data appended to an image is how polyglot files (an
 * image that is also a ZIP, an HTML page, a script) are made: such uploads are refused as
 * `content_mismatch` rather than silently cut, so the stored bytes and their `content_hash` are
 * always exactly what the worker sent. The images a JPEG itself declares after its end in a
 * Multi-Picture Format segment (an Ultra HDR photo's gain map, a camera's preview or depth map),
 * each a JPEG where the declaration says, are part of the photo, not other data.
 */
export function trailingDataAfterImage(b: Uint8Array, contentType: string): number {
  const t = normalizeContentType(contentType);
  const end = t === 'image/jpeg' ? jpegEnd(b) : t === 'image/png' ? pngEnd(b) : null;
  if (end === null) return 0;
  let last = b.length;
  while (last > end && b[last - 1] === 0) last--;
  if (last === end || t !== 'image/jpeg') return last - end;
  // Walk the declared images in order; only zero bytes may sit between them. A declared image
  // counts only when it is a whole JPEG exactly where declared (its own end marker at its end).
  const declared = mpfImages(b)
    .filter(([s, e]) => s >= end && e <= b.length && e > s + 2 && b[s] === 0xff && b[s + 1] === 0xd8 && jpegEnd(b.subarray(s, e)) === e - s)
    .sort((x, y) => x[0] - y[0]);
  let p = end;
  for (const [s, e] of declared) {
    while (p < s && b[p] === 0) p++;
    if (p !== s) break;
    p = e;
  }
  while (p < last && b[p] === 0) p++;
  return Math.max(0, last - p);
}

/**
 * The images after the first that a JPEG's Multi-Picture Format segment (CIPA DC-007: APP2
 * `MPF\0`, a TIFF structure whose MP Entry tag 0xB002 lists each image's size and offset from the
 * TIFF header) declares, as [start, end) offsets in the file; none when it has no such segment.
 */
function mpfImages(b: Uint8Array): [number, number][] {
  let o = 2;
  while (o + 4 <= b.length && b[o] === 0xff) {
    const m = b[o + 1]!;
    if (m === 0xda || m === 0xd9) break; // the scan starts: no more APP segments
    if (m === 0xff) {
      o++;
      continue;
    }
    if (m === 0x01 || (m >= 0xd0 && m <= 0xd7)) {
      o += 2;
      continue;
    }
    const len = (b[o + 2]! << 8) | b[o + 3]!;
    if (len < 2) break;
    if (m === 0xe2 && len >= 14 && ascii(b, o + 4, 4) === 'MPF\0') return mpEntries(b, o + 8, Math.min(b.length, o + 2 + len));
    o += 2 + len;
  }
  return [];
}

/** More images than any camera declares (a primary, a preview, a gain map, depth maps). */
const MAX_MPF_IMAGES = 16;

function mpEntries(b: Uint8Array, tiff: number, segEnd: number): [number, number][] {
  const le = b[tiff] === 0x49 && b[tiff + 1] === 0x49;
  if (!le && !(b[tiff] === 0x4d && b[tiff + 1] === 0x4d)) return [];
  const r16 = (p: number) => (le ? b[p]! | (b[p + 1]! << 8) : (b[p]! << 8) | b[p + 1]!);
  const r32 = (p: number) => (le ? (b[p]! | (b[p + 1]! << 8) | (b[p + 2]! << 16) | (b[p + 3]! << 24)) >>> 0 : u32(b, p));
  const ifd = tiff + r32(tiff + 4);
  if (ifd + 2 > segEnd) return [];
  const out: [number, number][] = [];
  for (let i = 0, n = Math.min(r16(ifd), 64); i < n; i++) {
    const entry = ifd + 2 + 12 * i;
    if (entry + 12 > segEnd) break;
    if (r16(entry) !== 0xb002) continue;
    // The first MP Entry tag only, and a bounded number of images: the work never grows with a
    // crafted segment (cameras declare a handful).
    const values = tiff + r32(entry + 8);
    for (let j = 0; j < Math.min(Math.floor(r32(entry + 4) / 16), MAX_MPF_IMAGES); j++) {
      const e = values + 16 * j;
      if (e + 16 > segEnd) break;
      const size = r32(e + 4);
      const offset = r32(e + 8);
      if (offset !== 0) out.push([tiff + offset, tiff + offset + size]); // offset 0: the first image itself
    }
    break;
  }
  return out;
}

/** Offset just after the EOI marker, following segments and entropy-coded scans; null when not found. */
function jpegEnd(b: Uint8Array): number | null {
  if (b.length < 4 || b[0] !== 0xff || b[1] !== 0xd8) return null;
  let o = 2;
  while (o + 1 < b.length) {
    if (b[o] !== 0xff) return null;
    const m = b[o + 1]!;
    if (m === 0xff) {
      o++; // fill byte
      continue;
    }
    if (m === 0xd9) return o + 2;
    if (m === 0x01 || (m >= 0xd0 && m <= 0xd7)) {
      o += 2; // standalone markers
      continue;
    }
    if (o + 3 >= b.length) return null;
    const len = (b[o + 2]! << 8) | b[o + 3]!;
    if (len < 2) return null;
    o += 2 + len;
    if (m === 0xda) {
      // Entropy-coded data: runs until a marker other than a stuffed zero or a restart marker.
      while (o + 1 < b.length) {
        if (b[o] === 0xff) {
          const n = b[o + 1]!;
          if (n === 0x00 || (n >= 0xd0 && n <= 0xd7) || n === 0xff) {
            o += n === 0xff ? 1 : 2;
            continue;
          }
          break;
        }
        o++;
      }
    }
  }
  return null;
}

/** Offset just after the IEND chunk (length, type, data, CRC); null when not found. */
function pngEnd(b: Uint8Array): number | null {
  let o = 8;
  while (o + 12 <= b.length) {
    const len = u32(b, o);
    const type = ascii(b, o + 4, 4);
    const next = o + 12 + len;
    if (type === 'IEND') return next <= b.length ? next : null;
    if (next > b.length) return null;
    o = next;
  }
  return null;
}
