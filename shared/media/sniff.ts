/**
 * Real content type from magic bytes (D15), the size limits of D25, and the byte readers (`ascii`,
 * `u32`) that trailing-data.ts also uses. The upload checks themselves are in upload-check.ts;
 * the detection of data after an image's end is in trailing-data.ts.
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

export const MB = 1024 * 1024;
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

export const ascii = (b: Uint8Array, start: number, len: number): string => {
  let s = '';
  for (let i = start; i < start + len && i < b.length; i++) s += String.fromCharCode(b[i]!);
  return s;
};
export const u32 = (b: Uint8Array, o: number): number => ((b[o]! << 24) >>> 0) + (b[o + 1]! << 16) + (b[o + 2]! << 8) + b[o + 3]!;

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
