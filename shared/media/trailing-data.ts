/**
 * Data after an image's end: the bytes a JPEG (after its EOI marker, and after the images its
 * Multi-Picture Format segment declares) or a PNG (after its IEND chunk) carries beyond the image
 * itself, which is how polyglot files are made. Used by the upload checks (upload-check.ts).
 */
import { ascii, normalizeContentType, u32 } from './sniff';

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
