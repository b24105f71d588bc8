import { deflateRawSync } from 'node:zlib';
import sharp from 'sharp';
import { startTestRuntime, type TestRuntime } from '../support/harness';
import { trailingDataAfterImage } from '../../shared/media/trailing-data';
import { accept, createJob, detailedJpeg, liveBuyer, signupWorker, uploadFile } from './support';

/** A minimal ZIP holding one HTML page (what a polyglot JPEG+ZIP carries). */
function zipOfHtml(): Buffer {
  const name = Buffer.from('index.html');
  const data = Buffer.from('<html><script>alert(document.cookie)</script></html>');
  const deflated = deflateRawSync(data);
  const local = Buffer.alloc(30);
  local.writeUInt32LE(0x04034b50, 0);
  local.writeUInt16LE(20, 4);
  local.writeUInt16LE(8, 8);
  local.writeUInt32LE(deflated.length, 18);
  local.writeUInt32LE(data.length, 22);
  local.writeUInt16LE(name.length, 26);
  const end = Buffer.alloc(22);
  end.writeUInt32LE(0x06054b50, 0);
  return Buffer.concat([local, name, deflated, end]);
}

/**
 * A JPEG as Ultra HDR phones and multi-picture cameras write it: an APP2 Multi-Picture Format
 * segment (little-endian TIFF structure, MP Entry tag 0xB002) right after SOI declares `secondary`,
 * which follows the primary image's EOI; `extra` (undeclared) comes after it.
 */
function withMpf(primary: Buffer, secondary: Buffer, extra: Buffer = Buffer.alloc(0), offsetDelta = 0): Buffer {
  const entriesOff = 8 + 2 + 12 * 3 + 4; // from the TIFF header: its 8 bytes, the IFD (3 entries, next-IFD offset)
  const payload = Buffer.alloc(4 + entriesOff + 32);
  payload.write('MPF\0', 0, 'latin1');
  const t = 4;
  payload.write('II', t, 'latin1');
  payload.writeUInt16LE(42, t + 2);
  payload.writeUInt32LE(8, t + 4);
  let p = t + 8;
  payload.writeUInt16LE(3, p);
  p += 2;
  const entry = (tag: number, type: number, count: number, value: (o: number) => void) => {
    payload.writeUInt16LE(tag, p);
    payload.writeUInt16LE(type, p + 2);
    payload.writeUInt32LE(count, p + 4);
    value(p + 8);
    p += 12;
  };
  entry(0xb000, 7, 4, (o) => payload.write('0100', o, 'latin1')); // MPF version
  entry(0xb001, 4, 1, (o) => payload.writeUInt32LE(2, o)); // number of images
  entry(0xb002, 7, 32, (o) => payload.writeUInt32LE(entriesOff, o)); // MP entries
  payload.writeUInt32LE(0, p);
  const segment = Buffer.concat([Buffer.from([0xff, 0xe2, (payload.length + 2) >> 8, (payload.length + 2) & 0xff]), payload]);
  const primaryLength = primary.length + segment.length;
  const tiffAbs = 2 + 4 + 4; // SOI, the segment's marker and length, 'MPF\0'
  const e = t + entriesOff;
  payload.writeUInt32LE(0x030000, e); // primary: baseline JPEG
  payload.writeUInt32LE(primaryLength, e + 4);
  payload.writeUInt32LE(0, e + 8);
  payload.writeUInt32LE(0, e + 16); // the secondary image (a gain map, a preview)
  payload.writeUInt32LE(secondary.length, e + 20);
  payload.writeUInt32LE(primaryLength - tiffAbs + offsetDelta, e + 24);
  const rebuilt = Buffer.concat([Buffer.from([0xff, 0xe2, (payload.length + 2) >> 8, (payload.length + 2) & 0xff]), payload]);
  return Buffer.concat([primary.subarray(0, 2), rebuilt, primary.subarray(2), secondary, extra]);
}

// Issue 11.8: an image with other data appended after its end marker (a ZIP of HTML after a JPEG's
// EOI, anything after a PNG's IEND) is refused as content_mismatch; nothing is stored or scored.
describe('uploads: polyglot images are refused as content_mismatch', () => {
  it('the end of a JPEG is found past an EXIF thumbnail (its own end marker) and the scans', async () => {
    const jpeg = await sharp(await detailedJpeg(7)).withExif({ IFD0: { Make: 'Test', Model: 'Cam' } }).jpeg({ progressive: true }).toBuffer();
    expect(trailingDataAfterImage(jpeg, 'image/jpeg')).toBe(0);
    expect(trailingDataAfterImage(Buffer.concat([jpeg, zipOfHtml()]), 'image/jpeg')).toBeGreaterThan(60);
    expect(trailingDataAfterImage(Buffer.concat([jpeg, Buffer.alloc(64)]), 'image/jpeg')).toBe(0); // zero padding is not data
  });

  it('a JPEG whose Multi-Picture segment declares the image after its end (an Ultra HDR gain map, a camera preview) has no other data; anything undeclared still counts', async () => {
    const primary = await detailedJpeg(9);
    const gainMap = await sharp({ create: { width: 64, height: 48, channels: 3, background: '#808080' } }).jpeg().toBuffer();
    expect(trailingDataAfterImage(withMpf(primary, gainMap), 'image/jpeg')).toBe(0);
    expect(trailingDataAfterImage(withMpf(primary, gainMap, Buffer.alloc(32)), 'image/jpeg')).toBe(0); // zero padding
    expect(trailingDataAfterImage(withMpf(primary, gainMap, zipOfHtml()), 'image/jpeg')).toBeGreaterThan(60); // the ZIP (its zero tail is padding)
    // A declaration that does not point at a JPEG where the bytes are declares nothing.
    expect(trailingDataAfterImage(withMpf(primary, gainMap, Buffer.alloc(0), 7), 'image/jpeg')).toBeGreaterThan(gainMap.length - 10);
    expect(trailingDataAfterImage(withMpf(primary, zipOfHtml()), 'image/jpeg')).toBeGreaterThan(60); // declared, but not a JPEG
    // Declared, starting like a JPEG, but not one: an HTML page behind a JPEG's first two bytes.
    const fake = Buffer.concat([Buffer.from([0xff, 0xd8]), Buffer.from('<html><script>alert(1)</script></html>'), zipOfHtml()]);
    expect(trailingDataAfterImage(withMpf(primary, fake), 'image/jpeg')).toBeGreaterThan(60);
  });

  it('PNG: nothing may follow IEND', async () => {
    const png = await sharp(await detailedJpeg(8)).png().toBuffer();
    expect(trailingDataAfterImage(png, 'image/png')).toBe(0);
    expect(trailingDataAfterImage(Buffer.concat([png, Buffer.from('<html></html>')]), 'image/png')).toBe(13);
  });

  describe('through the API', () => {
    let rt: TestRuntime;
    beforeAll(async () => {
      process.env.LOCAL_FIXED_OTP = '123456';
      rt = await startTestRuntime();
    });
    afterAll(async () => {
      await rt?.stop();
    });

    it.each([
      ['JPEG + ZIP of HTML', 'image/jpeg', 'shop.jpg', async () => Buffer.concat([await detailedJpeg(11), zipOfHtml()])],
      ['PNG + HTML after IEND', 'image/png', 'shop.png', async () => Buffer.concat([await sharp(await detailedJpeg(12)).png().toBuffer(), Buffer.from('<html><body>hi</body></html>')])],
    ])('%s: 400 content_mismatch, nothing stored', async (_name, type, filename, make) => {
      const buyer = await liveBuyer(rt);
      const job = await createJob(rt, buyer.live, { files_needed: 1 });
      const w = await signupWorker(rt);
      const a = await accept(rt, w.token, job.id);
      const r = await uploadFile(rt, w.token, a.json.id, await make(), type, filename);
      expect(r.status).toBe(400);
      expect(r.json.error.type ?? r.json.error.code).toBeDefined();
      expect(r.json.error.details).toEqual([expect.objectContaining({ field: 'file', code: 'content_mismatch', message: expect.stringMatching(/after the end of the image/) })]);
      const sub = (await rt.request('GET', `/internal/worker/submissions/${a.json.id}`, { key: w.token })).json;
      expect(sub.status).toBe('awaiting_upload');
    });

    it('an Ultra HDR photo (a gain map declared in its Multi-Picture segment) is accepted', async () => {
      const buyer = await liveBuyer(rt);
      const job = await createJob(rt, buyer.live, { files_needed: 1 });
      const w = await signupWorker(rt);
      const a = await accept(rt, w.token, job.id);
      const gainMap = await sharp({ create: { width: 64, height: 48, channels: 3, background: '#808080' } }).jpeg().toBuffer();
      expect((await uploadFile(rt, w.token, a.json.id, withMpf(await detailedJpeg(13), gainMap), 'image/jpeg', 'PXL_ultrahdr.jpg')).status).toBe(202);
    });

    it('the same image without the appended data is accepted', async () => {
      const buyer = await liveBuyer(rt);
      const job = await createJob(rt, buyer.live, { files_needed: 1 });
      const w = await signupWorker(rt);
      const a = await accept(rt, w.token, job.id);
      expect((await uploadFile(rt, w.token, a.json.id, await detailedJpeg(11), 'image/jpeg', 'shop.jpg')).status).toBe(202);
    });
  });
});
