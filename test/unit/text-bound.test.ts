/**
 * An image's text_extraction is bounded like a transcript (docs/annotations.md "Long texts"): the
 * submission item holds up to five, and a DynamoDB item is at most 400 KB.
 */
import { analyzeImage } from '../../shared/media/image-quality';
import { localSemantics, mergeImageAnnotations } from '../../shared/media/annotation';
import type { ImageFacts } from '../../shared/media/annotation';
import { boundText, TEXT_MAX_BYTES } from '../../shared/media/annotation/text-bound';
import type { TextExtraction } from '../../shared/media/annotation/types';
import { detailedJpeg } from '../fixtures/media';

const jsonBytes = (v: unknown) => Buffer.byteLength(JSON.stringify(v), 'utf8');

/** What local OCR gives for a dense page: `lines` lines of `perLine` words, each at confidence 0.93. */
function page(lines: number, perLine: number, lastLine?: string): TextExtraction {
  const rows = Array.from({ length: lines }, (_, l) => Array.from({ length: perLine }, (_, w) => `word${l}x${w}`));
  if (lastLine) rows.push(lastLine.split(' '));
  return { full_text: rows.map((r) => r.join(' ')).join('\n'), words: rows.flat().map((text) => ({ text, confidence: 0.93 })) };
}

describe('text_extraction bound', () => {
  it('a text within the bound is whole: truncated false, with the counts of the whole', () => {
    const t = page(3, 4);
    expect(boundText(t)).toEqual({ ...t, truncated: false, total_words: 12, total_characters: [...t.full_text].length });
  });

  it('a longer text keeps its first words within 32 KiB of JSON, full_text their text with its line breaks, marked truncated', () => {
    const t = page(400, 12); // 4,800 words, about 190 KB
    expect(jsonBytes(t)).toBeGreaterThan(4 * TEXT_MAX_BYTES);
    const b = boundText(t);
    expect(jsonBytes(b)).toBeLessThanOrEqual(TEXT_MAX_BYTES);
    expect(b.truncated).toBe(true);
    expect(b.total_words).toBe(4800);
    expect(b.total_characters).toBe([...t.full_text].length);
    expect(b.words).toEqual(t.words.slice(0, b.words.length));
    expect(t.full_text.startsWith(b.full_text)).toBe(true);
    expect(b.full_text.endsWith(b.words.at(-1)!.text)).toBe(true);
    expect(b.full_text).toContain('\n');
    // As many words as fit: one more would not.
    expect(jsonBytes({ ...b, words: t.words.slice(0, b.words.length + 1), full_text: `${b.full_text} ${t.words[b.words.length]!.text}` })).toBeGreaterThan(TEXT_MAX_BYTES);
  });

  it('bounding twice changes nothing: the counts of the whole and truncated stay', () => {
    const once = boundText(page(400, 12));
    expect(boundText(once)).toEqual(once);
  });

  it('PII in the part cut off still counts: it is looked for in the whole text', async () => {
    const q = await analyzeImage(await detailedJpeg(320, 240));
    const text = page(400, 12, 'write to alice.smith@example.com today');
    const facts: ImageFacts = { width: q.width, height: q.height, view_width: q.width, view_height: q.height, faces: [], objects: [], text, nsfw: null, failures: {} };
    const a = mergeImageAnnotations(q, facts, localSemantics(facts), 'local');
    expect(a.text_extraction!.truncated).toBe(true);
    expect(a.text_extraction!.full_text).not.toContain('alice.smith');
    expect(a.safety.pii_types).toContain('email');
  });
});
