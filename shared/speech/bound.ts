/**
 * The bound on a transcript stored inline (D65, docs/annotations.md "Long transcripts").
 *
 * A transcript grows with the recording (about 2.5 KB of segments and text per minute of speech)
 * while everything that holds one has a fixed limit: the submission item holds the transcription of
 * each of its files (up to 5), a File item and the `submission.scored` event item one each, and a
 * DynamoDB item is at most 400 KB; the event reaches EventBridge (EVENT_MAX_BYTES, 1 MiB) as the
 * stream record's DynamoDB JSON. So every transcript a file's transcription records is bounded to
 * TRANSCRIPT_MAX_BYTES of JSON:
 * - 5 × 32 KiB = 160 KiB, 40 % of the item limit, leaves the rest of the submission item (the
 *   parts' metadata, scores and annotations, the verdict history) more than half of it;
 * - a File item and the event item carry one transcript: 32 KiB; in the stream record's DynamoDB
 *   JSON (a type wrapper around every value) a transcript is at most about twice that, far under
 *   the event limit;
 * - a page of 100 Files carries at most 3.2 MiB of transcripts, under Lambda's 6 MB response.
 * The size is the transcript's JSON in UTF-8, which is never less than what DynamoDB counts for it
 * (attribute names, values, and a byte or more per element).
 *
 * A longer transcript keeps its first segments, as many as fit whole, and `full_text` becomes their
 * text; `truncated: true` says so, and `total_segments`, `total_characters` and `total_end_seconds`
 * describe the whole transcript, so a cut transcript is never taken for a complete one. Every
 * transcript so bounded carries the four fields (`truncated: false` when it is whole). Nothing is
 * invented: a segment is kept whole or not at all (Transcribe's word timings are not kept, so a
 * segment cannot be cut at a known time). The whole transcript is not stored elsewhere: Amazon
 * Transcribe's own output document stays in the bucket under `transcripts/` for its retention
 * (30 days) and is not served.
 */
import type { Transcript } from './types';

/** The most bytes of JSON (UTF-8) a stored transcript takes. */
export const TRANSCRIPT_MAX_BYTES = 32 * 1024;

/** A transcript as stored: with its truncation marker and the whole transcript's counts. */
export type BoundedTranscript = Required<Transcript>;

const jsonBytes = (v: unknown) => Buffer.byteLength(JSON.stringify(v), 'utf8');

function codePoints(s: string): number {
  let n = 0;
  for (const _ of s) n++;
  return n;
}

/**
 * `t` within `maxBytes` of JSON, with its marker (see above). Idempotent: a transcript bounded
 * before keeps its counts of the whole and its `truncated: true`.
 */
export function boundTranscript(t: Transcript, maxBytes = TRANSCRIPT_MAX_BYTES): BoundedTranscript {
  const totals = {
    total_segments: t.total_segments ?? t.segments.length,
    total_characters: t.total_characters ?? codePoints(t.full_text),
    total_end_seconds: t.total_end_seconds !== undefined ? t.total_end_seconds : t.segments.reduce<number | null>((m, s) => (m === null || s.end_seconds > m ? s.end_seconds : m), null),
  };
  const whole: BoundedTranscript = { full_text: t.full_text, segments: t.segments, truncated: t.truncated === true, ...totals };
  if (jsonBytes(whole) <= maxBytes) return whole;
  const cut = (k: number): BoundedTranscript => {
    const segments = t.segments.slice(0, k);
    return { full_text: segments.map((s) => s.text).join(' '), segments, truncated: true, ...totals };
  };
  // The size of the first k segments, counted as they are added: each adds its JSON and its text in
  // `full_text` (escaped, without the quotes), and after the first a comma and a space.
  let size = jsonBytes(cut(0));
  let k = 0;
  for (const s of t.segments) {
    const add = jsonBytes(s) + jsonBytes(s.text) - 2 + (k > 0 ? 2 : 0);
    if (size + add > maxBytes) break;
    size += add;
    k++;
  }
  let out = cut(k);
  while (k > 0 && jsonBytes(out) > maxBytes) out = cut(--k);
  return out;
}
