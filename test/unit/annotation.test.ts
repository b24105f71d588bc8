/**
 * Annotations (D51 full image shape, D54, D55 encodings): every label is a measurement or a model
 * output. Models load once for the file (beforeAll) and stay loaded; fixtures are generated here
 * with sharp / ffmpeg, plus the packaged sandbox samples and a face photo shipped inside
 * @vladmandic/human (assets/samples.jpg). No network: the bedrock provider is driven by hand-written
 * Converse outputs at the SDK client.
 */
import { readFileSync } from 'node:fs';
import fsPromises from 'node:fs/promises';
import path from 'node:path';
import sharp from 'sharp';
import { annotateAudio, annotateImage, annotateVideo, extractKeyframes } from '../../shared/media/annotate-image';
import { annotateVideoWithKeyframes } from '../../shared/media/keyframes';
import { readExif } from '../../shared/media/exif';
import { workerRegion } from '../../shared/media/region';
import { packageFile } from '../../shared/media/native';
import {
  AnnotationOutputSchema,
  BedrockAnnotationProvider,
  LocalAnnotationProvider,
  annotationProviderFor,
  colourHistogram,
  compositionOf,
  coverageOf,
  keepOcrWords,
  measureNoise,
  nsfwScore,
  parseAnnotationOutput,
  piiInText,
  positionOf,
  sceneFromObjects,
  sceneSegments,
  shutdownModels,
  warmUp,
  POSITIONS,
} from '../../shared/media/annotation';
import { blocksImage, blurred, detailedJpeg, ffmpegFixture, hasFfmpeg } from '../fixtures/media';
import { annotationReplies } from '../fixtures/bedrock-annotation.published-format';

jest.setTimeout(120_000);
const local = new LocalAnnotationProvider();
const samples = path.join(__dirname, '..', '..', 'samples');
const sample = (f: string) => readFileSync(path.join(samples, f));
const hexDist = (a: string, b: string) => {
  const p = (h: string) => [1, 3, 5].map((i) => parseInt(h.slice(i, i + 2), 16));
  const [x, y] = [p(a), p(b)];
  return Math.hypot(x[0]! - y[0]!, x[1]! - y[1]!, x[2]! - y[2]!);
};
/** Text rendered with a font installed on the machine (fc-list: DejaVu Sans). */
const textImage = (lines: string[], width = 900) =>
  sharp(
    Buffer.from(
      `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${80 + lines.length * 70}"><rect width="100%" height="100%" fill="#ffffff"/>${lines
        .map((l, i) => `<text x="40" y="${90 + i * 70}" font-family="DejaVu Sans" font-size="44" fill="#111111">${l}</text>`)
        .join('')}</svg>`,
    ),
  )
    .png()
    .toBuffer();

beforeAll(async () => {
  await warmUp();
}, 120_000);
afterAll(async () => {
  await shutdownModels();
});

describe('derived encodings (D55)', () => {
  it('position is the 3 × 3 cell of the box centre; coverage is box area / image area', () => {
    expect(positionOf([0, 0, 0.2, 0.2])).toBe('top-left');
    expect(positionOf([0.4, 0.4, 0.2, 0.2])).toBe('center');
    expect(positionOf([0.8, 0.45, 0.1, 0.1])).toBe('right');
    expect(positionOf([0.4, 0.9, 0.2, 0.1])).toBe('bottom');
    expect(POSITIONS).toHaveLength(9);
    expect(coverageOf([0.25, 0.25, 0.5, 0.5])).toBe(0.25);
    expect(coverageOf([0.9, 0.9, 0.5, 0.5])).toBe(0.01); // clipped to the frame
  });

  it('composition: close-up, centered, rule of thirds, off-center; null without a subject', () => {
    expect(compositionOf([])).toBeNull();
    expect(compositionOf([{ label: 'dog', confidence: 0.9, box: [0.1, 0.1, 0.8, 0.8] }])).toMatch(/^close-up: dog fills 64%/);
    expect(compositionOf([{ label: 'cup', confidence: 0.9, box: [0.45, 0.45, 0.1, 0.1] }])).toBe('centered subject: cup');
    expect(compositionOf([{ label: 'person', confidence: 0.9, box: [0.28, 0.28, 0.1, 0.1] }])).toBe('rule of thirds: person at the top-left intersection');
    expect(compositionOf([{ label: 'car', confidence: 0.9, box: [0.85, 0.45, 0.1, 0.1] }])).toBe('off-center subject: car at right');
    const three = [0.1, 0.4, 0.7].map((x) => ({ label: 'person', confidence: 0.8, box: [x, 0.4, 0.1, 0.2] as [number, number, number, number] }));
    expect(compositionOf(three)).toMatch(/; 3 subjects$/);
  });

  it('scene is inferred from COCO objects with a capped confidence; no voting object → null', () => {
    const s = sceneFromObjects([
      { label: 'car', confidence: 0.9, box: [0, 0, 0.2, 0.2] },
      { label: 'traffic light', confidence: 0.6, box: [0, 0, 0.1, 0.1] },
      { label: 'person', confidence: 0.9, box: [0, 0, 0.2, 0.2] },
    ])!;
    expect(s).toMatchObject({ setting: 'street', indoor: false });
    expect(s.confidence).toBeCloseTo(0.72, 2); // 0.8 × max conf 0.9 × share 1
    const contested = sceneFromObjects([
      { label: 'oven', confidence: 0.5, box: [0, 0, 0.2, 0.2] },
      { label: 'car', confidence: 0.4, box: [0, 0, 0.2, 0.2] },
    ])!;
    expect(contested).toMatchObject({ setting: 'kitchen', indoor: true });
    expect(contested.confidence).toBeLessThan(0.3);
    expect(sceneFromObjects([{ label: 'person', confidence: 0.99, box: [0, 0, 1, 1] }])).toBeNull();
  });

  it('nsfw_score = porn + hentai + ½ sexy, 0..1', () => {
    expect(nsfwScore({ Neutral: 0.9, Drawing: 0.1 })).toBe(0);
    expect(nsfwScore({ Porn: 0.6, Hentai: 0.2, Sexy: 0.2 })).toBe(0.9);
    expect(nsfwScore({ Sexy: 1 })).toBe(0.5);
  });

  it('PII in text: e-mail, phone, Luhn-valid card, IBAN; plain text and invalid numbers are not PII', () => {
    expect(piiInText('write to alice.smith@example.co.uk today')).toEqual(['email']);
    expect(piiInText('Call +44 20 7946 0958')).toEqual(['phone_number']);
    expect(piiInText('Card 4111 1111 1111 1111')).toContain('payment_card');
    expect(piiInText('Card 4111 1111 1111 1112')).not.toContain('payment_card');
    expect(piiInText('IBAN DE89 3704 0044 0532 0130 00')).toContain('iban');
    expect(piiInText('OPEN 9 TO 5, SALE 2024')).toEqual([]);
  });

  it('OCR words: ≥ 60/100 kept, confidence reported 0..1 (D55), lone 1–2 character junk dropped', () => {
    const r = keepOcrWords([
      { words: [{ text: 'HELLO', confidence: 91 }, { text: 'a', confidence: 88 }, { text: 'WORLD', confidence: 59 }] },
      { words: [{ text: 'ce', confidence: 83 }, { text: '4', confidence: 74 }] },
      { words: [{ text: '|', confidence: 95 }] },
    ]);
    expect(r).toEqual({ full_text: 'HELLO a', words: [{ text: 'HELLO', confidence: 0.91 }, { text: 'a', confidence: 0.88 }] });
  });

  it('scene segments cut where consecutive keyframe histograms differ strongly, midway between them', () => {
    const red = colourHistogram(Buffer.from([255, 0, 0, 250, 5, 5]), 3);
    const blue = colourHistogram(Buffer.from([0, 0, 255, 5, 5, 250]), 3);
    const segs = sceneSegments(
      [
        { index: 0, timestamp_seconds: 3, histogram: red },
        { index: 1, timestamp_seconds: 6, histogram: blue },
        { index: 2, timestamp_seconds: 9, histogram: blue },
      ],
      12,
    );
    expect(segs).toEqual([
      { index: 0, start_seconds: 0, end_seconds: 4.5, keyframe_indexes: [0] },
      { index: 1, start_seconds: 4.5, end_seconds: 12, keyframe_indexes: [1, 2] },
    ]);
  });
});

describe('image annotations from the local models', () => {
  it('OCR reads rendered text; words carry confidences 0..1; an e-mail in the text is PII', async () => {
    const a = await annotateImage(await textImage(['QUARTERLY REPORT 2024', 'contact: sales@example.com']), undefined, { provider: local });
    expect(a.text_extraction!.full_text).toMatch(/QUARTERLY\s+REPORT\s+2024/);
    expect(a.text_extraction!.full_text).toContain('sales@example.com');
    for (const w of a.text_extraction!.words) {
      expect(w.confidence).toBeGreaterThanOrEqual(0.6);
      expect(w.confidence).toBeLessThanOrEqual(1);
    }
    expect(a.safety.pii_detected).toBe(true);
    expect(a.safety.pii_types).toContain('email');
  });

  it('palette finds the drawn colours; an image without text gives an empty extraction, not null', async () => {
    const a = await annotateImage(await blocksImage(), undefined, { provider: local });
    for (const drawn of ['#e02020', '#2040d0', '#20a040', '#f0d020']) expect(Math.min(...a.color_palette.map((c) => hexDist(c, drawn)))).toBeLessThan(30);
    expect(a.text_extraction).toEqual({ full_text: '', words: [], truncated: false, total_words: 0, total_characters: 0 });
    expect(a.face_count).toBe(0); // face-free synthetic image
    expect(a.objects).toEqual([]);
    expect(a.composition).toBeNull();
    expect(a.unavailable?.composition).toBeDefined();
  });

  it('blur score orders a sharp photo below its blurred copy (higher = blurrier, D55)', async () => {
    const sharpPhoto = await detailedJpeg(640, 480);
    const [s, b] = await Promise.all([annotateImage(sharpPhoto, undefined, { provider: local }), annotateImage(await blurred(sharpPhoto), undefined, { provider: local })]);
    expect(s.quality_metrics.blur_score).toBeLessThan(b.quality_metrics.blur_score);
    expect(b.quality_metrics.blur_score).toBeGreaterThan(0.5);
  });

  it('a photo of faces (shipped in @vladmandic/human) gives face_count ≥ 1, person objects with D55 encodings, faces as PII', async () => {
    const a = await annotateImage(readFileSync(packageFile('@vladmandic/human', 'assets/samples.jpg')), undefined, { provider: local });
    expect(a.face_count).toBeGreaterThanOrEqual(1);
    expect(a.objects!.some((o) => o.label === 'person')).toBe(true);
    for (const o of a.objects!) {
      expect(POSITIONS).toContain(o.position);
      expect(o.confidence).toBeGreaterThanOrEqual(0.45);
      expect(o.confidence).toBeLessThanOrEqual(1);
      expect(o.approximate_coverage).toBeGreaterThan(0);
      expect(o.approximate_coverage).toBeLessThanOrEqual(1);
      // D73: the box in pixels, inside the image, its area matching the coverage.
      const [x, y, w, h] = o.bbox!;
      expect(x).toBeGreaterThanOrEqual(0);
      expect(y).toBeGreaterThanOrEqual(0);
      expect(x + w).toBeLessThanOrEqual(a.width + 0.01);
      expect(y + h).toBeLessThanOrEqual(a.height + 0.01);
      expect((w * h) / (a.width * a.height)).toBeCloseTo(o.approximate_coverage, 2);
    }
    expect(a.composition).toEqual(expect.any(String));
    expect(a.safety.pii_types).toContain('face');
    expect(a.safety.nsfw_score).toBeGreaterThanOrEqual(0);
    expect(a.safety.nsfw_score).toBeLessThan(0.5);
    expect(a.safety.violence_score).toBeNull();
    expect(a.unavailable?.violence_score).toMatch(/no offline violence model/);
    expect([a.width, a.height]).toEqual([1280, 1158]); // stored bytes' dimensions (D55)
  });

  it('the sandbox images (jpg, png, webp, gif) come out annotated; the text "SANDBOX SAMPLE" is read', async () => {
    const manifest = JSON.parse(readFileSync(path.join(samples, 'manifest.json'), 'utf8')) as { file: string; width: number | null; height: number | null }[];
    for (const f of ['sample.jpg', 'sample.png', 'sample.webp', 'sample.gif']) {
      const a = await annotateImage(sample(f), undefined, { provider: local });
      const m = manifest.find((x) => x.file === f)!;
      expect([a.type, a.width, a.height]).toEqual(['image', m.width, m.height]);
      expect(a.text_extraction!.full_text).toContain('SANDBOX SAMPLE');
      expect(a.color_palette.length).toBeGreaterThan(2);
      expect(a.face_count).toBe(0);
      expect(a.safety.nsfw_score).toBeLessThan(0.1);
      expect(a.annotation_model).toMatch(/^local-annotator\/1 \(tesseract\.js 7.0.0.*human 3\.3\.6.*nsfwjs 4\.3\.0/);
    }
  });

  it('EXIF GPS maps to the right region (D30) on an image that is also annotated', async () => {
    const paris = await sharp(await detailedJpeg(320, 240))
      .jpeg()
      .withExif({ IFD3: { GPSLatitudeRef: 'N', GPSLatitude: '48/1 51/1 3024/100', GPSLongitudeRef: 'E', GPSLongitude: '2/1 17/1 4020/100' } })
      .toBuffer();
    const [exif, a] = await Promise.all([readExif(paris), annotateImage(paris, undefined, { provider: local })]);
    expect(await workerRegion(exif.latitude, exif.longitude)).toBe('FR-IDF');
    expect(a.type).toBe('image');
  });
});

describe('bedrock provider (Converse replies written to the published format, no network)', () => {
  const client = (out: unknown) => {
    const sent: unknown[] = [];
    return { sent, converse: async (input: unknown) => (sent.push(input), out) } as never;
  };

  it('semantic parts come from the model, validated; measured parts still come from the bytes', async () => {
    const c = client(annotationReplies.good) as unknown as { sent: { messages: { content: { image?: { format: string } }[] }[] }[] };
    const provider = new BedrockAnnotationProvider({ client: c as never, modelId: 'amazon.nova-pro-v1:0' });
    const a = await annotateImage(sample('sample.jpg'), undefined, { provider });
    expect(a.annotation_provider).toBe('bedrock');
    expect(a.objects).toEqual([
      { label: 'storefront', confidence: 0.92, position: 'center', approximate_coverage: 0.55, bbox: null },
      { label: 'bicycle', confidence: 0.71, position: 'bottom-left', approximate_coverage: 0.08, bbox: null },
    ]);
    expect(a.scene).toEqual({ setting: 'city street', indoor: false, confidence: 0.88 });
    expect(a.safety.violence_score).toBe(0.01);
    expect(a.text_extraction!.full_text).toBe('SANDBOX SAMPLE'); // OCR measured locally wins over the model's reading
    expect(a.face_count).toBe(0);
    expect(a.width).toBe(1600);
    expect(a.annotation_model).toMatch(/^bedrock:amazon\.nova-pro-v1:0 \+ local-annotator\/1/);
    expect(c.sent[0]!.messages[0]!.content[0]!.image!.format).toBe('jpeg');
  });

  it('a provider that fails to answer (throttled) fails the annotation, so the step is retried, rather than freezing the local rules into the File', async () => {
    const throttled = Object.assign(new Error('Too many requests, please wait before trying again.'), { name: 'ThrottlingException', $metadata: { httpStatusCode: 429 } });
    const provider = new BedrockAnnotationProvider({ client: { converse: async () => Promise.reject(throttled) } as never });
    await expect(annotateImage(sample('sample.gif'), undefined, { provider })).rejects.toMatchObject({ name: 'ThrottlingException' });
  });

  it('an invalid answer (percent confidence, unknown position, prose) falls back to the local rules, the reason recorded', async () => {
    for (const out of [annotationReplies.outOfRange, annotationReplies.badPosition, annotationReplies.prose]) {
      const provider = new BedrockAnnotationProvider({ client: client(out) });
      const a = await annotateImage(sample('sample.gif'), undefined, { provider });
      expect(a.annotation_provider).toBe('local');
      expect(a.unavailable?.provider).toMatch(/^bedrock failed, local rules used: model answer/);
      expect(a.objects).toEqual([]);
    }
    expect(() => parseAnnotationOutput(annotationReplies.outOfRange, 'm')).toThrow(/objects\.0\.confidence/);
    expect(AnnotationOutputSchema.safeParse({ objects: [], scene: null, composition: null, violence_score: 1.2 }).success).toBe(false);
  });

  it('provider choice: ANNOTATION_PROVIDER wins; bedrock only inside a Lambda', () => {
    expect(annotationProviderFor({ provider: 'local' }).name).toBe('local');
    expect(annotationProviderFor({ provider: 'bedrock' }).name).toBe('bedrock');
    expect(() => annotationProviderFor({ provider: 'magic' })).toThrow(/ANNOTATION_PROVIDER/);
    expect(annotationProviderFor().name).toBe(process.env.AWS_LAMBDA_FUNCTION_NAME ? 'bedrock' : 'local');
  });
});

const ff = describe; // ffmpeg is a prerequisite (README): without it these fail rather than skip
ff('audio and video annotations (ffmpeg)', () => {
  it('audio: duration, channels, EBU R128 loudness, noise level; speech fields null with a reason', async () => {
    // lavfi sine: amplitude 1/8 (−18 dBFS peak); the quiet copy is 0.25 × (−12 dB)
    const sine = (gain: number) => ffmpegFixture(['-f', 'lavfi', '-i', 'sine=frequency=440:duration=3:sample_rate=44100', '-af', `volume=${gain}`, '-c:a', 'pcm_s16le'], '.wav');
    const hiss = ffmpegFixture(['-f', 'lavfi', '-i', 'anoisesrc=color=white:amplitude=0.3:duration=3:sample_rate=44100', '-c:a', 'pcm_s16le'], '.wav');
    const [t, q, n] = await Promise.all([annotateAudio(sine(1), 'audio/wav'), annotateAudio(sine(0.25), 'audio/wav'), annotateAudio(hiss, 'audio/wav')]);
    expect(t).toMatchObject({ type: 'audio', channels: 1, sample_rate: 44100, noise_level: 'low', speaker_count: null, transcript: null, language: null });
    expect(t.duration_seconds).toBeCloseTo(3, 1);
    expect(t.integrated_lufs).toBeGreaterThan(-24); // −18 dBFS peak sine: RMS −21 dBFS ≈ −21.6 LUFS
    expect(t.integrated_lufs).toBeLessThan(-19);
    expect(t.integrated_lufs! - q.integrated_lufs!).toBeCloseTo(12, 0); // −12 dB gain → −12 LU
    expect(t.true_peak_dbfs).toBeCloseTo(-18, 0);
    expect(t.unavailable.transcript).toMatch(/no offline speech model/);
    // D58: every spec field is present; what no provider computes is null with its reason.
    for (const f of ['emotion_tone', 'room_acoustics', 'background_sounds', 'speaker_demographics'] as const) {
      expect(t[f]).toBeNull();
      expect(t.unavailable[f]).toEqual(expect.any(String));
    }
    expect(n.noise_level).toBe('high');
  });

  it('a video without a sound track names no sound measurement in annotation_model (only what ran)', async () => {
    const mute = ffmpegFixture(['-f', 'lavfi', '-i', 'testsrc=duration=1:size=160x120:rate=5', '-c:v', 'libx264', '-pix_fmt', 'yuv420p'], '.mp4');
    const v = await annotateVideo(mute, { annotateKeyframes: false });
    expect(v.annotation_model).toMatch(/^local-media-analysis\/2 \(no sound measurement ran\)/);
    expect(v.annotation_model).not.toMatch(/ebur128/);
  });

  it('a sound track whose measuring tool cannot run fails the annotation (the step is retried), rather than freezing null loudness into the File', async () => {
    const wav = ffmpegFixture(['-f', 'lavfi', '-i', 'sine=frequency=440:duration=1:sample_rate=44100', '-c:a', 'pcm_s16le'], '.wav');
    process.env.FFMPEG_PATH = '/nonexistent/ffmpeg';
    try {
      await expect(annotateAudio(wav, 'audio/wav')).rejects.toMatchObject({ code: 'ENOENT' });
    } finally {
      delete process.env.FFMPEG_PATH;
    }
  });

  it('sandbox audio (mp3, wav, m4a) comes out annotated', async () => {
    for (const [f, ct] of [['sample.mp3', 'audio/mpeg'], ['sample.wav', 'audio/wav'], ['sample.m4a', 'audio/mp4']] as const) {
      const a = await annotateAudio(sample(f), ct);
      expect(a.type).toBe('audio');
      expect(a.duration_seconds).toBeCloseTo(12, 0);
      expect(a.integrated_lufs).toEqual(expect.any(Number));
      expect(a.noise_level).toMatch(/^(low|medium|high)$/);
    }
  });

  it('keyframes land at 25/50/75 % (±0.5 s) — checked on the frame content; scenes split where the picture changes', async () => {
    // luma = 25·t: a keyframe's mean brightness tells the time it was taken from
    const ramp = ffmpegFixture(['-f', 'lavfi', '-i', "nullsrc=s=160x120:r=10:d=8,geq=lum='25*T':cb=128:cr=128", '-c:v', 'libx264', '-preset', 'ultrafast', '-qp', '0', '-pix_fmt', 'yuv420p'], '.mp4');
    const frames = await extractKeyframes(ramp, 8);
    expect(frames.map((f) => f.timestamp_seconds)).toEqual([2, 4, 6]);
    for (const f of frames) {
      const { channels } = await sharp(f.png).greyscale().stats();
      expect(Math.abs(channels[0]!.mean / 25 - f.timestamp_seconds)).toBeLessThanOrEqual(0.5);
      expect([f.width, f.height]).toEqual([160, 120]);
    }
    // red for 4.5 s, then blue: keyframes at 3 / 6 / 9 s of 12 → 2 segments, cut at 4.5
    const cut = ffmpegFixture(
      ['-f', 'lavfi', '-i', 'color=c=red:s=160x120:r=10:d=4.5', '-f', 'lavfi', '-i', 'color=c=blue:s=160x120:r=10:d=7.5', '-filter_complex', '[0][1]concat=n=2:v=1:a=0', '-c:v', 'libx264', '-preset', 'ultrafast', '-pix_fmt', 'yuv420p'],
      '.mp4',
    );
    const uploaded: number[] = [];
    const { annotations, keyframes } = await annotateVideoWithKeyframes(cut, async (index, png) => {
      expect(png.subarray(1, 4).toString()).toBe('PNG');
      uploaded.push(index);
      return { key: `keyframes/file_test/${index}.png` };
    });
    expect(uploaded.sort()).toEqual([0, 1, 2]);
    expect(keyframes.map((k) => [k.index, k.timestamp_seconds, k.width, k.height, k.key])).toEqual([
      [0, 3, 160, 120, 'keyframes/file_test/0.png'],
      [1, 6, 160, 120, 'keyframes/file_test/1.png'],
      [2, 9, 160, 120, 'keyframes/file_test/2.png'],
    ]);
    expect(keyframes[0]!.annotations!.color_palette[0]).toMatch(/^#(f|e)/); // red
    expect(annotations.scenes!.map((s) => [s.start_seconds, s.end_seconds, s.keyframe_indexes])).toEqual([
      [0, 4.5, [0]],
      [4.5, 12, [1, 2]],
    ]);
  });

  it('sandbox videos (mp4, mov): probe fields, 3 annotated keyframes, sound-track loudness; extractKeyframes reuses the frames', async () => {
    for (const f of ['sample.mp4', 'sample.mov']) {
      const bytes = sample(f);
      const v = await annotateVideo(bytes);
      expect(v).toMatchObject({ type: 'video', width: 1280, height: 720, fps: 24, codec: 'h264', has_audio: true, actions: null, transcript: null });
      expect(v.keyframes!.map((k) => k.timestamp_seconds)).toEqual([3, 6, 9]);
      for (const k of v.keyframes!) expect(k.annotations!.type).toBe('image');
      expect(v.integrated_lufs).toEqual(expect.any(Number));
      expect(v.scenes!.length).toBeGreaterThanOrEqual(1);
      const again = await extractKeyframes(bytes, v.duration_seconds!);
      expect(again.map((k) => k.timestamp_seconds)).toEqual([3, 6, 9]);
    }
  });

  it('a video is copied to /tmp once for all the tools that read it (probe, loudness, keyframes), not once each', async () => {
    const bytes = sample('sample.mp4');
    const writes = jest.spyOn(fsPromises, 'writeFile');
    try {
      const v = await annotateVideo(bytes, { annotateKeyframes: false });
      expect(v.integrated_lufs).toEqual(expect.any(Number)); // the loudness and the keyframes both read it
      expect(v.keyframes).toHaveLength(3);
      expect(writes.mock.calls.filter(([, data]) => data === bytes)).toHaveLength(1);
    } finally {
      writes.mockRestore();
    }
  });
});

describe('noise measurement (pure)', () => {
  it('digital silence is low noise; a loud flat-spectrum floor is high', () => {
    expect(measureNoise(new Int16Array(16000))!.noise_level).toBe('low');
    let seed = 1;
    const noise = Int16Array.from({ length: 16000 }, () => ((seed = (seed * 16807) % 2147483647) / 2147483647 - 0.5) * 20000);
    expect(measureNoise(noise)!.noise_level).toBe('high');
  });
});
