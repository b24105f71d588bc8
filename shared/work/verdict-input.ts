/**
 * The verdict's input: a submission's per-file results combined into one (D26, D54, D65, D66, D67, D68).
 * Pure: no reads, no writes. Deciding and writing the verdict is verdict.ts.
 *
 * Each file's score is taken as the annotation stage leaves it: the content policy is applied to the
 * file's annotations (D67: a violation is a final 1-star rejection with `policy_violation`); a file
 * whose bytes the annotation stage could not decode (`annotation_error`, never a machinery failure:
 * those are retried, D66) is a final 1-star rejection with `unreadable_media`, as the scoring stage's
 * own decoding failure is. The weakest file decides (every file must pass), and a pre-check
 * rejection over any provider score. The speech of audio and video is merged into the annotations
 * (D65). The verdict's reason codes are the union of the deciding files' (D68: always an array;
 * approved `[]`, and the dimensions below the threshold when no file named a code).
 *
 * `readyForVerdict` says when the input is complete: every planned file has a score AND annotations,
 * or at once when a pre-check rejected a file (D26, D54).
 */
import type { Verdict } from '../scoring/verdict';
import { reasonCodesFromDimensions, sortReasonCodes, type Dimensions, type ReasonCode, type ScoreResult } from '../scoring/types';
import { policyFinding, policyRejection } from '../scoring/policy';
import { precheckRejection } from '../scoring/precheck';
import { withSpeech } from '../speech/annotate';
import type { FilePart, SubmissionItem } from './model';

export interface Combined {
  stars: number;
  /** The weakest file's per dimension over the files a model judged; null when none was. */
  dimensions: Dimensions | null;
  reasoning: string;
  /** final rejection without a provider verdict: pre-check or policy (no retry, no charge) */
  precheck: boolean;
  /** D68: union of the files' reason codes; always an array (approved: []) */
  reasonCodes: ReasonCode[];
  /** what to show in submission.scored (the first file's annotations) */
  annotations: Record<string, unknown> | null;
}

/**
 * What the annotation stage records, with `annotations: null`, when the file's bytes did not decode
 * for annotation (a video whose frames do not decode). Never written for a machinery failure: that
 * fails the step, which is retried (shared/media/failures.ts).
 */
export interface AnnotationError {
  code: 'unreadable_media';
  /** for the worker and the buyer, e.g. "the video could not be decoded for annotation" */
  message: string;
  /** the decoder's own words, for operators */
  detail: string;
}

/** A file's part with the annotation stage's failure record (written through stage-write.ts). */
type AnnotatedPart = FilePart & { annotation_error?: AnnotationError | null };

function annotationErrorOf(part: FilePart | undefined): AnnotationError | null {
  return (part as AnnotatedPart | undefined)?.annotation_error ?? null;
}

/** D54/D68: bytes the annotation stage could not decode: final, 1 star, no File, no charge, as a pre-check. */
function unreadableRejection(e: AnnotationError): ScoreResult {
  return { ...precheckRejection([{ code: 'unreadable_media', reason: e.message }]), ai_reasoning: `Rejected: ${e.message}.` };
}

/**
 * A file's annotations with its speech filled in (D65), as the File and the event carry them: every
 * copy of the transcript goes through here, bounded (shared/speech/bound.ts, `truncated` when cut).
 */
export function annotationsOf(part: FilePart | undefined): Record<string, unknown> | null {
  return withSpeech((part?.annotations as Record<string, unknown> | null | undefined) ?? null, part?.transcription);
}

/**
 * The file's result after the annotation stage: bytes it could not decode (D54: never approved with
 * annotations null) and the content policy (D67) override the provider's score.
 */
function effectiveScore(part: FilePart | undefined): ScoreResult | undefined {
  const s = part?.score;
  if (!s || s.precheck_rejected) return s;
  const unreadable = annotationErrorOf(part);
  if (unreadable) return unreadableRejection(unreadable);
  const f = policyFinding(annotationsOf(part));
  return f ? policyRejection(f, s) : s;
}

/** One result for the submission: the weakest file decides (every file must pass). */
export function combine(sub: SubmissionItem): Combined {
  const scores = sub.uploads.map((u) => effectiveScore(sub.parts[u.file_id])).filter((s): s is ScoreResult => !!s);
  const pre = scores.filter((s) => s.precheck_rejected);
  const decisive = pre.length ? pre : scores;
  const worst = decisive.reduce((a, b) => (b.ai_star_rating < a.ai_star_rating ? b : a));
  const judged = decisive.flatMap((s) => (s.dimensions ? [s.dimensions] : []));
  const dims = (k: keyof Dimensions) => Math.min(...judged.map((d) => d[k]));
  const reasoning =
    sub.uploads.length === 1
      ? worst.ai_reasoning
      : sub.uploads
          .map((u, i) => {
            const s = effectiveScore(sub.parts[u.file_id]);
            return s ? `File ${i + 1} (${u.filename}): ${s.ai_reasoning}` : null;
          })
          .filter(Boolean)
          .join(' ');
  return {
    stars: worst.ai_star_rating,
    dimensions: judged.length ? { relevance: dims('relevance'), quality: dims('quality'), instruction_compliance: dims('instruction_compliance') } : null,
    reasoning,
    precheck: pre.length > 0,
    reasonCodes: sortReasonCodes(decisive.flatMap((s) => s.reason_codes ?? [])),
    // D54/D67: null for pre-check rejections and policy violations.
    annotations: pre.length ? null : annotationsOf(sub.parts[sub.uploads[0]!.file_id]),
  };
}

/** D68: approved → []; otherwise what fell short (the dimensions below T when no file named a code). */
export function finalCodes(v: Verdict, c: Combined, threshold: number): ReasonCode[] {
  if (v === 'approved') return [];
  return c.reasonCodes.length ? c.reasonCodes : reasonCodesFromDimensions(c.dimensions, threshold);
}

/**
 * Ready for a verdict? Every file scored and annotated (annotations null with an `annotation_error`
 * count as written: that file is rejected), or a pre-check rejection (at once, D54).
 */
export function readyForVerdict(sub: SubmissionItem): boolean {
  if (sub.status !== 'pending_score' || !sub.uploads?.length) return false;
  const parts = sub.uploads.map((u) => sub.parts?.[u.file_id]);
  if (parts.some((p) => p?.score?.precheck_rejected)) return true;
  return parts.every((p) => p?.score && p.annotations !== undefined);
}
