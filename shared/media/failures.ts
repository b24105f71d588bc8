/**
 * Telling "these bytes do not decode" from "the machinery failed" (D66's rule, applied to media):
 * a pipeline stage records the first as its result for the file (the scoring stage rejects it as
 * unreadable media, the annotation stage stores annotations null), and throws the second, so its
 * message comes back with backoff and, after the last attempt, waits in the dead-letter queue with
 * an alarm. Nothing is rejected, and no field is left empty for good, because a tool, a thread,
 * the disk or S3 failed.
 *
 * The machinery: the model worker thread died; ffprobe/ffmpeg is missing, could not start, was
 * killed (a signal: the out-of-memory killer, or our time-out); an operating-system error (ENOSPC,
 * EMFILE, ENOMEM, EACCES…); a module that does not load; an AWS SDK call (a keyframe's PutObject).
 * Anything else a decoder throws (sharp, exifr, music-metadata, a tool's non-zero exit) is about
 * the bytes.
 */
const MACHINERY_NAMES = new Set(['AnalysisWorkerFailed', 'MediaToolMissingError', 'MediaToolStopped']);
const MODULE_CODES = new Set(['MODULE_NOT_FOUND', 'ERR_MODULE_NOT_FOUND', 'ERR_DLOPEN_FAILED']);
/** errno codes (ENOSPC, EMFILE…); not Node's `ERR_…` codes, which decoders raise on malformed data too. */
const ERRNO = /^E(?!RR_)[A-Z0-9]+$/;

export function isMachineryFailure(err: unknown, depth = 0): boolean {
  if (typeof err !== 'object' || err === null) return false;
  const e = err as { name?: unknown; code?: unknown; $metadata?: unknown; cause?: unknown };
  if (typeof e.name === 'string' && MACHINERY_NAMES.has(e.name)) return true;
  if (e.$metadata !== undefined) return true;
  if (typeof e.code === 'string' && (ERRNO.test(e.code) || MODULE_CODES.has(e.code))) return true;
  return depth < 3 && e.cause !== undefined && isMachineryFailure(e.cause, depth + 1);
}
