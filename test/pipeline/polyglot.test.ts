import { deflateRawSync } from 'node:zlib';
import sharp from 'sharp';
import { startTestRuntime, type TestRuntime } from '../support/harness';
import { trailingDataAfterImage } from '../../shared/media/sniff';
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

// Issue 11.8: an image with other data appended after its end marker (a ZIP of HTML after a JPEG's
// EOI, anything after a PNG's IEND) is refused as content_mismatch; nothing is stored or scored.
describe('uploads: polyglot images are refused as content_mismatch', () => {
  it('the end of a JPEG is found past an EXIF thumbnail (its own end marker) and the scans', async () => {
    const jpeg = await sharp(await detailedJpeg(7)).withExif({ IFD0: { Make: 'Test', Model: 'Cam' } }).jpeg({ progressive: true }).toBuffer();
    expect(trailingDataAfterImage(jpeg, 'image/jpeg')).toBe(0);
    expect(trailingDataAfterImage(Buffer.concat([jpeg, zipOfHtml()]), 'image/jpeg')).toBeGreaterThan(60);
    expect(trailingDataAfterImage(Buffer.concat([jpeg, Buffer.alloc(64)]), 'image/jpeg')).toBe(0); // zero padding is not data
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

    it('the same image without the appended data is accepted', async () => {
      const buyer = await liveBuyer(rt);
      const job = await createJob(rt, buyer.live, { files_needed: 1 });
      const w = await signupWorker(rt);
      const a = await accept(rt, w.token, job.id);
      expect((await uploadFile(rt, w.token, a.json.id, await detailedJpeg(11), 'image/jpeg', 'shop.jpg')).status).toBe(202);
    });
  });
});
