/**
 * D53: every simulated upload's bytes are unique (no false duplicates), without re-encoding the
 * sample: a nonce goes into a container-level field every decoder ignores.
 * - JPEG: a COM segment right after SOI.
 * - PNG: a tEXt chunk before IEND (with its CRC).
 * - GIF: a Comment Extension before the trailer.
 * - WebP: a trailing unknown RIFF chunk is not allowed in simple WebP, so the nonce goes into EXIF
 *   while the image is re-encoded (quality kept high) by `perceptuallyDistinct`.
 * - MP3: an ID3v2.3 tag with a TXXX frame in front.
 * - WAV: a LIST/INFO chunk appended, RIFF size updated.
 * - MP4 / MOV / M4A: a top-level `free` box appended.
 *
 * D69: images must also be perceptually distinct, or the near-duplicate check would reject every
 * simulated image after the first one approved in the organization. So an image is first
 * re-rendered with a nonce-derived 8×8 grid of light and dark cells blended over the sample
 * (`perceptuallyDistinct`): its 64-bit perceptual hash is then dominated by the grid, and two
 * simulated images differ in about half of the bits (test/pipeline/near-duplicate.test.ts checks
 * a few hundred pairwise). The nonce is still written into the container as above.
 */
import { createHash } from 'node:crypto';
import { crc32 } from 'node:zlib';

function u32be(n: number): Buffer {
  const b = Buffer.alloc(4);
  b.writeUInt32BE(n >>> 0);
  return b;
}

function jpeg(bytes: Buffer, nonce: Buffer): Buffer {
  if (bytes[0] !== 0xff || bytes[1] !== 0xd8) throw new Error('not a JPEG');
  const len = Buffer.alloc(2);
  len.writeUInt16BE(nonce.length + 2);
  return Buffer.concat([bytes.subarray(0, 2), Buffer.from([0xff, 0xfe]), len, nonce, bytes.subarray(2)]);
}

function png(bytes: Buffer, nonce: Buffer): Buffer {
  const iend = bytes.lastIndexOf(Buffer.from('IEND', 'latin1')) - 4;
  if (iend < 8) throw new Error('not a PNG');
  const type = Buffer.from('tEXt', 'latin1');
  const data = Buffer.concat([Buffer.from('Comment\0', 'latin1'), nonce]);
  const chunk = Buffer.concat([u32be(data.length), type, data, u32be(crc32(Buffer.concat([type, data])))]);
  return Buffer.concat([bytes.subarray(0, iend), chunk, bytes.subarray(iend)]);
}

function gif(bytes: Buffer, nonce: Buffer): Buffer {
  if (bytes[bytes.length - 1] !== 0x3b) throw new Error('not a GIF');
  const blocks: Buffer[] = [];
  for (let i = 0; i < nonce.length; i += 255) {
    const part = nonce.subarray(i, i + 255);
    blocks.push(Buffer.from([part.length]), part);
  }
  return Buffer.concat([bytes.subarray(0, bytes.length - 1), Buffer.from([0x21, 0xfe]), ...blocks, Buffer.from([0x00, 0x3b])]);
}

function mp3(bytes: Buffer, nonce: Buffer): Buffer {
  // ID3v2.3 TXXX frame: encoding 0 (ISO-8859-1), empty description, value.
  const value = Buffer.concat([Buffer.from([0]), Buffer.from('\0', 'latin1'), nonce]);
  const frame = Buffer.concat([Buffer.from('TXXX', 'latin1'), u32be(value.length), Buffer.from([0, 0]), value]);
  const size = frame.length;
  const syncsafe = Buffer.from([(size >> 21) & 0x7f, (size >> 14) & 0x7f, (size >> 7) & 0x7f, size & 0x7f]);
  return Buffer.concat([Buffer.from('ID3', 'latin1'), Buffer.from([3, 0, 0]), syncsafe, frame, bytes]);
}

function wav(bytes: Buffer, nonce: Buffer): Buffer {
  if (bytes.toString('latin1', 0, 4) !== 'RIFF' || bytes.toString('latin1', 8, 12) !== 'WAVE') throw new Error('not a WAV');
  const text = nonce.length % 2 === 0 ? nonce : Buffer.concat([nonce, Buffer.from([0])]);
  const icmt = Buffer.concat([Buffer.from('ICMT', 'latin1'), le32(text.length), text]);
  const info = Buffer.concat([Buffer.from('INFO', 'latin1'), icmt]);
  const list = Buffer.concat([Buffer.from('LIST', 'latin1'), le32(info.length), info]);
  const out = Buffer.concat([bytes, list]);
  out.writeUInt32LE(out.length - 8, 4);
  return out;
}

function le32(n: number): Buffer {
  const b = Buffer.alloc(4);
  b.writeUInt32LE(n);
  return b;
}

function isoBmff(bytes: Buffer, nonce: Buffer): Buffer {
  if (bytes.toString('latin1', 4, 8) !== 'ftyp') throw new Error('not an ISO BMFF file');
  return Buffer.concat([bytes, u32be(8 + nonce.length), Buffer.from('free', 'latin1'), nonce]);
}

/** Grid cells: 8 × 8, one bit of the nonce's SHA-256 each. */
const GRID = 8;

/** The image re-rendered with a nonce-derived grid blended over it, in its own format. */
export async function perceptuallyDistinct(contentType: string, bytes: Buffer, nonce: string, webpExif?: Buffer): Promise<Buffer> {
  const { default: sharp } = await import('sharp');
  const img = sharp(bytes, { failOn: 'none' });
  const meta = await img.metadata();
  const width = meta.width ?? 64;
  const height = meta.height ?? 64;
  const bits = createHash('sha256').update(`sandbox-grid:${nonce}`).digest();
  const cells = Buffer.alloc(GRID * GRID * 4);
  for (let i = 0; i < GRID * GRID; i++) {
    const on = (bits[i >> 3]! >> (i & 7)) & 1;
    cells.fill(on ? 255 : 0, i * 4, i * 4 + 3);
    cells[i * 4 + 3] = 150; // about 60 % opaque: the grid dominates the coarse structure
  }
  const overlay = await sharp(cells, { raw: { width: GRID, height: GRID, channels: 4 } })
    .resize(width, height, { kernel: 'nearest', fit: 'fill' })
    .png()
    .toBuffer();
  const out = img.composite([{ input: overlay }]);
  switch (contentType) {
    case 'image/jpeg':
      return out.jpeg({ quality: 90 }).toBuffer();
    case 'image/png':
      return out.png().toBuffer();
    case 'image/gif':
      return out.gif().toBuffer();
    default:
      // WebP: one encode, with the nonce in EXIF (see `webp` below).
      return out.webp({ quality: 90 }).withExif({ IFD0: { ImageDescription: (webpExif ?? Buffer.from(nonce)).toString('latin1') } }).toBuffer();
  }
}

/** The sample's bytes with `nonce` embedded; still a valid file of the same content type. */
export async function uniqueBytes(contentType: string, bytes: Buffer, nonce: string): Promise<Buffer> {
  const n = Buffer.from(`sandbox:${nonce}`, 'latin1');
  if (contentType === 'image/webp') return perceptuallyDistinct(contentType, bytes, nonce, n);
  if (contentType.startsWith('image/')) bytes = await perceptuallyDistinct(contentType, bytes, nonce);
  switch (contentType) {
    case 'image/jpeg':
      return jpeg(bytes, n);
    case 'image/png':
      return png(bytes, n);
    case 'image/gif':
      return gif(bytes, n);
    case 'audio/mpeg':
      return mp3(bytes, n);
    case 'audio/wav':
      return wav(bytes, n);
    case 'audio/mp4':
    case 'video/mp4':
    case 'video/quicktime':
      return isoBmff(bytes, n);
    default:
      throw new Error(`no sample for ${contentType}`);
  }
}
