/**
 * D65: the bound on a transcript stored inline (shared/speech/bound.ts). A transcript within
 * TRANSCRIPT_MAX_BYTES is kept whole and says so; a longer one keeps its first segments, whole,
 * with `truncated: true` and the whole transcript's counts, so nothing is invented and the cut is
 * never silent. Long documents are generated in Transcribe's published format
 * (test/fixtures/transcribe-output.long.ts, the shape of the recorded-format fixture).
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { boundTranscript, MAX_SEGMENT_CHARACTERS, parseTranscribeOutput, TRANSCRIPT_MAX_BYTES, withSpeech, type Transcript, type TranscriptSegment } from '../../shared/speech';
import { longTranscribeOutput } from '../fixtures/transcribe-output.long';

const fixture = (name: string) => JSON.parse(readFileSync(join(__dirname, '..', 'fixtures', `transcribe-output.published-format.${name}.json`), 'utf8')) as unknown;
const bytes = (v: unknown) => Buffer.byteLength(JSON.stringify(v), 'utf8');

describe('D65: a stored transcript is bounded, and says when it is cut', () => {
  it('a short transcript is kept whole: truncated false, the counts of the whole, nothing changed', () => {
    const t = parseTranscribeOutput(fixture('two-speakers')).transcript;
    const b = boundTranscript(t);
    expect(b).toEqual({ ...t, truncated: false, total_segments: 2, total_characters: t.full_text.length, total_end_seconds: 4.12 });
    expect(boundTranscript(b)).toEqual(b);
  });

  it('no speech: whole, zero counts, no end', () => {
    expect(boundTranscript(parseTranscribeOutput(fixture('no-speech')).transcript)).toEqual({ full_text: '', segments: [], truncated: false, total_segments: 0, total_characters: 0, total_end_seconds: null });
  });

  it('three hours of conversation keep their first segments, whole, within the bound, marked with the whole transcript counts', () => {
    const whole = parseTranscribeOutput(longTranscribeOutput({ seconds: 3 * 3600, speakers: 2, seed: 7 })).transcript;
    expect(bytes(whole)).toBeGreaterThan(250 * 1024); // what used to be stored
    const b = boundTranscript(whole);
    expect(b.truncated).toBe(true);
    expect(bytes(b)).toBeLessThanOrEqual(TRANSCRIPT_MAX_BYTES);
    const k = b.segments.length;
    expect(k).toBeGreaterThan(20);
    expect(b.segments).toEqual(whole.segments.slice(0, k)); // the first ones, unchanged
    expect(b.full_text).toBe(b.segments.map((s) => s.text).join(' '));
    expect(whole.full_text.startsWith(b.full_text)).toBe(true); // a prefix of Transcribe's own text
    expect(b.full_text.length).toBeGreaterThan(8000); // the scoring prompt reads as much as before
    expect(b).toMatchObject({ total_segments: whole.segments.length, total_characters: whole.full_text.length, total_end_seconds: whole.segments[whole.segments.length - 1]!.end_seconds });
    // As many as fit: one more segment would not.
    expect(bytes({ ...b, segments: whole.segments.slice(0, k + 1), full_text: whole.segments.slice(0, k + 1).map((s) => s.text).join(' ') })).toBeGreaterThan(TRANSCRIPT_MAX_BYTES);
    // Bounding again changes nothing: the counts stay those of the whole.
    expect(boundTranscript(b)).toEqual(b);
  });

  it('a monologue without speaker labels is split into segments of about 1,000 characters, so its beginning is kept', () => {
    const whole = parseTranscribeOutput(longTranscribeOutput({ seconds: 2 * 3600, speakers: 1, labels: false, seed: 3 })).transcript;
    expect(whole.segments.length).toBeGreaterThan(50);
    for (const s of whole.segments) {
      expect(s.speaker).toBeNull();
      expect(s.text.length).toBeLessThan(MAX_SEGMENT_CHARACTERS + 40);
    }
    for (let i = 1; i < whole.segments.length; i++) expect(whole.segments[i]!.start_seconds).toBeGreaterThanOrEqual(whole.segments[i - 1]!.end_seconds);
    expect(whole.segments.map((s) => s.text).join(' ')).toBe(whole.full_text); // no word lost or added by the split
    const b = boundTranscript(whole);
    expect(b.truncated).toBe(true);
    expect(b.segments.length).toBeGreaterThan(5);
    expect(bytes(b)).toBeLessThanOrEqual(TRANSCRIPT_MAX_BYTES);
  });

  it('the bound is in bytes: text of three-byte characters keeps fewer characters, never more bytes', () => {
    const seg = (i: number): TranscriptSegment => ({ start_seconds: i * 5, end_seconds: i * 5 + 4.5, speaker: `spk_${i % 2}`, text: 'いらっしゃいませ。クロワッサンを二つください。'.repeat(8), confidence: 0.93 });
    const segments = Array.from({ length: 400 }, (_, i) => seg(i));
    const t: Transcript = { full_text: segments.map((s) => s.text).join(''), segments };
    const b = boundTranscript(t);
    expect(b.truncated).toBe(true);
    expect(bytes(b)).toBeLessThanOrEqual(TRANSCRIPT_MAX_BYTES);
    expect(b.segments.length).toBeGreaterThan(10);
    expect(b).toMatchObject({ total_segments: 400, total_characters: t.full_text.length, total_end_seconds: 399 * 5 + 4.5 });
  });

  it('a first segment larger than the bound by itself: nothing is kept, and the marker says so', () => {
    const huge: TranscriptSegment = { start_seconds: 0, end_seconds: 9000, speaker: null, text: 'word '.repeat(10_000).trim(), confidence: 0.9 };
    const b = boundTranscript({ full_text: huge.text, segments: [huge] });
    expect(b).toEqual({ full_text: '', segments: [], truncated: true, total_segments: 1, total_characters: huge.text.length, total_end_seconds: 9000 });
  });

  it('a transcript recorded without the bound is bounded and marked when it becomes annotations (the File and event copies)', () => {
    const speech = parseTranscribeOutput(longTranscribeOutput({ seconds: 3600, speakers: 2, seed: 11 }));
    const a = withSpeech(
      { type: 'audio', transcript: null, annotation_model: 'local', unavailable: {} },
      { status: 'completed', provider: 'transcribe', job_name: 'media-x', speech, derived: { topics: ['bakery'], keywords: ['bread'], emotion_tone: 'neutral', model: 'bedrock:m', unavailable: {} }, models: ['amazon-transcribe'] },
    )!;
    const t = (a as Record<string, unknown>).transcript as ReturnType<typeof boundTranscript>;
    expect(t.truncated).toBe(true);
    expect(bytes(t)).toBeLessThanOrEqual(TRANSCRIPT_MAX_BYTES);
    expect(t.total_segments).toBe(speech.transcript.segments.length);
  });
});
