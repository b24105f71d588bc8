/**
 * D15 / D25: real type from magic bytes, upload checks. Fixtures are generated here
 * (sharp for images, ffmpeg lavfi for audio/video — skipped with a message when ffmpeg is absent).
 */
import { MAX_SIZE_BYTES, mp4TrackHandlers, normalizeContentType, sniffContentType } from '../../shared/media/sniff';
import { checkUpload, uploadCheckError } from '../../shared/media/upload-check';
import { audioFixtures, hasFfmpeg, imageInFormat, videoFixtures } from '../fixtures/media';

const FFMPEG = hasFfmpeg();
if (!FFMPEG) console.warn('ffmpeg not found (set FFMPEG_PATH or install it): audio/video magic-byte tests are skipped');
const itAv = it; // ffmpeg is a prerequisite (README): without it these fail rather than skip
const ALL = ['image/jpeg', 'image/png', 'image/webp', 'image/gif', 'audio/mpeg', 'audio/wav', 'audio/mp4', 'video/mp4', 'video/quicktime'];
const head = (b: Buffer, n = 4096) => b.subarray(0, n);

describe('D15 magic-byte detection of every accepted format', () => {
  it.each(['jpeg', 'png', 'webp', 'gif'] as const)('image/%s from sharp output', async (fmt) => {
    const bytes = await imageInFormat(fmt);
    expect(sniffContentType(head(bytes))).toBe(`image/${fmt}`);
    expect(checkUpload({ declaredType: `image/${fmt}`, bytesHead: head(bytes), size: bytes.length, acceptedFormats: ALL })).toMatchObject({ ok: true, contentType: `image/${fmt}`, category: 'image' });
  });

  itAv('audio/mpeg with an ID3 tag and as a bare MPEG frame sync', () => {
    expect(sniffContentType(head(audioFixtures.mp3()))).toBe('audio/mpeg');
    const bare = audioFixtures.mp3NoId3();
    expect(bare.subarray(0, 3).toString('latin1')).not.toBe('ID3');
    expect(sniffContentType(head(bare))).toBe('audio/mpeg');
  });

  itAv('audio/wav (RIFF/WAVE)', () => {
    expect(sniffContentType(head(audioFixtures.wav()))).toBe('audio/wav');
  });

  itAv('audio/mp4: ftyp M4A brand; audio/x-m4a declared normalizes to audio/mp4', () => {
    const m4a = audioFixtures.m4a();
    expect(m4a.subarray(8, 12).toString('latin1')).toBe('M4A ');
    expect(sniffContentType(head(m4a))).toBe('audio/mp4');
    const r = checkUpload({ declaredType: 'audio/x-m4a', bytesHead: head(m4a), size: m4a.length, acceptedFormats: ['audio/mp4'] });
    expect(r).toMatchObject({ ok: true, contentType: 'audio/mp4' });
  });

  itAv('generic mp4 brand: audio-only track → audio/mp4, video track → video/mp4 (moov in head)', () => {
    const audioOnly = audioFixtures.mp4AudioOnly();
    expect(mp4TrackHandlers(audioOnly)).toEqual(['soun']);
    expect(sniffContentType(audioOnly)).toBe('audio/mp4');
    const video = videoFixtures.mp4(1, true);
    expect(sniffContentType(video)).toBe('video/mp4');
    // declared audio/mp4 but the bytes hold a video track → content_mismatch
    const r = checkUpload({ declaredType: 'audio/mp4', bytesHead: video, size: video.length, acceptedFormats: ALL });
    expect(r.ok).toBe(false);
    if (!r.ok) expect(r.errors.map((e) => e.code)).toEqual(['content_mismatch']);
  });

  itAv('generic mp4 brand with moov at the end is undecided in the head and accepted as declared', () => {
    const video = videoFixtures.mp4(1, false);
    expect(sniffContentType(head(video, 64))).toBe('mp4');
    expect(checkUpload({ declaredType: 'video/mp4', bytesHead: head(video, 64), size: video.length, acceptedFormats: ALL }).ok).toBe(true);
  });

  itAv('video/quicktime (ftyp qt)', () => {
    const mov = videoFixtures.mov(1);
    expect(sniffContentType(head(mov))).toBe('video/quicktime');
    const r = checkUpload({ declaredType: 'video/mp4', bytesHead: head(mov), size: mov.length, acceptedFormats: ALL });
    expect(r.ok).toBe(false);
  });
});

describe('D25 upload checks', () => {
  it('a PNG declared as image/jpeg → content_mismatch', async () => {
    const png = await imageInFormat('png');
    const r = checkUpload({ declaredType: 'image/jpeg', bytesHead: head(png), size: png.length, acceptedFormats: ['image/jpeg', 'image/png'] });
    expect(r.ok).toBe(false);
    if (r.ok) return;
    expect(r.errors).toEqual([expect.objectContaining({ field: 'file', code: 'content_mismatch' })]);
    expect(r.errors[0]!.message).toContain('image/png');
    const err = uploadCheckError(r);
    expect(err.status).toBe(400);
    expect(err.type).toBe('validation_error');
    expect(err.details?.[0]?.code).toBe('content_mismatch');
  });

  it('over the category limit → file_too_large (image 25 MB, audio 50 MB, video 250 MB)', async () => {
    expect(MAX_SIZE_BYTES).toEqual({ image: 25 * 1024 * 1024, audio: 50 * 1024 * 1024, video: 250 * 1024 * 1024 });
    const jpg = await imageInFormat('jpeg');
    const r = checkUpload({ declaredType: 'image/jpeg', bytesHead: head(jpg), size: MAX_SIZE_BYTES.image + 1, acceptedFormats: ['image/jpeg'] });
    expect(r.ok).toBe(false);
    if (!r.ok) expect(r.errors.map((e) => e.code)).toEqual(['file_too_large']);
    expect(checkUpload({ declaredType: 'image/jpeg', bytesHead: head(jpg), size: MAX_SIZE_BYTES.image, acceptedFormats: ['image/jpeg'] }).ok).toBe(true);
  });

  it('a type the job does not accept, or an unknown type → unsupported_format', async () => {
    const gif = await imageInFormat('gif');
    const r = checkUpload({ declaredType: 'image/gif', bytesHead: head(gif), size: gif.length, acceptedFormats: ['image/jpeg'] });
    expect(!r.ok && r.errors.map((e) => e.code)).toEqual(['unsupported_format']);
    const r2 = checkUpload({ declaredType: 'application/pdf', bytesHead: Buffer.from('%PDF-1.7\n'), size: 9, acceptedFormats: ['image/jpeg'] });
    expect(!r2.ok && r2.errors.map((e) => e.code)).toEqual(['unsupported_format']);
  });

  it('bytes that are nothing known, declared as a supported type → content_mismatch', () => {
    const r = checkUpload({ declaredType: 'image/png', bytesHead: Buffer.from('hello world, not an image'), size: 25, acceptedFormats: ['image/png'] });
    expect(!r.ok && r.errors.map((e) => e.code)).toEqual(['content_mismatch']);
  });

  it('normalizes declared types (D15 audio/x-m4a → audio/mp4; parameters and case ignored)', () => {
    expect(normalizeContentType('audio/x-m4a')).toBe('audio/mp4');
    expect(normalizeContentType('IMAGE/JPEG; charset=binary')).toBe('image/jpeg');
    expect(normalizeContentType('.jpg')).toBeNull();
  });
});
