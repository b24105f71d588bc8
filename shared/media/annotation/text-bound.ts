/**
 * The bound on an image's `text_extraction` (docs/annotations.md "Long texts"), as a transcript is
 * bounded (shared/speech/bound.ts) and for the same reasons.
 *
 * OCR reads every word it can: a photo of a dense page or a screenshot of small print gives
 * thousands of words, about 40 bytes of JSON each, while everything that holds the annotations has
 * a fixed limit. The submission item holds the annotations of each of its files (up to 5), a File
 * item and the `submission.scored` event item one each, and a DynamoDB item is at most 400 KB. An
 * image file carries no transcript, so its text gets the transcript's bound, TEXT_MAX_BYTES of
 * JSON: 5 × 32 KiB = 160 KiB on the submission item, 32 KiB on a File, and a page of 100 Files at
 * most 3.2 MiB of text, under Lambda's 6 MB response. (A multimodal model's reading is bounded by
 * its output, 1,200 tokens, about 5 KB: never cut in practice.)
 *
 * A longer text keeps its first words, in reading order, as many as fit, and `full_text` becomes
 * the text up to the last one kept (its line breaks kept). `truncated: true` says so; `total_words`
 * and `total_characters` describe the whole text, so a cut text is never taken for a complete one.
 * Every text so bounded carries the three fields (`truncated: false` when it is whole). PII is
 * looked for in the whole text before it is bounded (image.ts mergeImageAnnotations).
 */
import type { TextExtraction } from './types';

/** The most bytes of JSON (UTF-8) a stored `text_extraction` takes. */
export const TEXT_MAX_BYTES = 32 * 1024;

export type BoundedText = TextExtraction & Required<Pick<TextExtraction, 'truncated' | 'total_words' | 'total_characters'>>;

const jsonBytes = (v: unknown) => Buffer.byteLength(JSON.stringify(v), 'utf8');

function codePoints(s: string): number {
  let n = 0;
  for (const _ of s) n++;
  return n;
}

/**
 * Where the first `k` words end in `fullText`, found in order; -1 when one of them is not there (a
 * model's reading, whose words need not spell its text).
 */
function endOfWords(fullText: string, words: TextExtraction['words'], k: number): number {
  let at = 0;
  for (let i = 0; i < k; i++) {
    const found = fullText.indexOf(words[i]!.text, at);
    if (found < 0) return -1;
    at = found + words[i]!.text.length;
  }
  return at;
}

/**
 * `t` within `maxBytes` of JSON, with its marker (see above). Idempotent: a text bounded before
 * keeps its counts of the whole and its `truncated: true`.
 */
export function boundText(t: TextExtraction, maxBytes = TEXT_MAX_BYTES): BoundedText {
  const whole: BoundedText = {
    ...t,
    truncated: t.truncated === true,
    total_words: t.total_words ?? t.words.length,
    total_characters: t.total_characters ?? codePoints(t.full_text),
  };
  if (jsonBytes(whole) <= maxBytes) return whole;
  const cut = (k: number): BoundedText => {
    const words = t.words.slice(0, k);
    const end = endOfWords(t.full_text, t.words, k);
    const full_text = end >= 0 ? t.full_text.slice(0, end) : words.map((w) => w.text).join(' ');
    return { ...whole, full_text, words, truncated: true };
  };
  // The most words that fit: the size grows with k, so a binary search finds it.
  let lo = 0;
  let hi = t.words.length;
  while (lo < hi) {
    const mid = Math.ceil((lo + hi) / 2);
    if (jsonBytes(cut(mid)) <= maxBytes) lo = mid;
    else hi = mid - 1;
  }
  return cut(lo);
}
