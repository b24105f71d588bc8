/**
 * The upload checks of D25: declared type against D15 and the job's accepted_formats, size against
 * the category limit, magic bytes against the declared type, and (when the whole file is given)
 * no data after a JPEG's or PNG's end. Failures become the 400 `validation_error` of D25.
 */
import { errors, type ApiError, type ErrorDetail } from '../errors';
import {
  categoryOf,
  MAX_SIZE_BYTES,
  MB,
  normalizeContentType,
  sniffContentType,
  sniffMatches,
  type AcceptedContentType,
  type MediaCategory,
  type Sniffed,
} from './sniff';
import { trailingDataAfterImage } from './trailing-data';

export interface UploadCheckInput {
  /** MIME type sent by the worker (multipart part or pre-signed request). */
  declaredType: string;
  /** The first bytes of the upload (≥ 64 bytes; 4 KiB recommended; more helps MP4). */
  bytesHead: Uint8Array;
  /** Total size in bytes. */
  size: number;
  /** The job's accepted_formats. */
  acceptedFormats: readonly string[];
  /**
   * The whole file, when the caller has it: JPEG and PNG files are then checked for data after
   * their end marker (`trailingDataAfterImage`). Without it that check does not run.
   */
  bytes?: Uint8Array;
}

export type UploadCheckResult =
  | { ok: true; contentType: AcceptedContentType; category: MediaCategory; sniffed: Sniffed }
  | { ok: false; errors: ErrorDetail[]; sniffed: Sniffed };

/**
 * D25 upload checks. Returns every failure found, each an ErrorDetail with `field: 'file'` and
 * `code` `unsupported_format` (declared type not a D15 type or not in the job's accepted_formats),
 * `file_too_large` (size over the category limit) or `content_mismatch` (magic bytes disagree with
 * the declared type). The caller answers 400 `validation_error` with these details (see
 * `uploadCheckError`).
 */
export function checkUpload(input: UploadCheckInput): UploadCheckResult {
  const errors: ErrorDetail[] = [];
  const declared = normalizeContentType(input.declaredType);
  const sniffed = sniffContentType(input.bytesHead);
  const accepted = new Set(input.acceptedFormats.map((f) => normalizeContentType(f)).filter((f) => f !== null));

  if (!declared) {
    errors.push({ field: 'file', code: 'unsupported_format', message: `Content type ${JSON.stringify(input.declaredType)} is not supported.` });
  } else if (!accepted.has(declared)) {
    errors.push({
      field: 'file',
      code: 'unsupported_format',
      message: `Content type ${declared} is not accepted by this job (accepted: ${[...accepted].join(', ')}).`,
    });
  }

  const sniffedCategory: MediaCategory | null = sniffed === 'mp4' ? 'video' : sniffed ? categoryOf(sniffed) : null;
  const category = declared ? categoryOf(declared) : sniffedCategory;
  if (category && input.size > MAX_SIZE_BYTES[category]) {
    errors.push({
      field: 'file',
      code: 'file_too_large',
      message: `File is ${input.size} bytes; the ${category} limit is ${MAX_SIZE_BYTES[category]} bytes (${MAX_SIZE_BYTES[category] / MB} MB).`,
    });
  }

  if (declared && !sniffMatches(sniffed, declared)) {
    errors.push({
      field: 'file',
      code: 'content_mismatch',
      message: sniffed
        ? `File content is ${sniffed === 'mp4' ? 'MP4' : sniffed}, not the declared ${declared}.`
        : `File content is not a recognised ${declared} file.`,
    });
  }

  if (errors.length === 0 && declared && input.bytes) {
    const extra = trailingDataAfterImage(input.bytes, declared);
    if (extra > 0) {
      errors.push({
        field: 'file',
        code: 'content_mismatch',
        message: `File has ${extra} bytes of other data after the end of the image (${declared}); upload the image alone.`,
      });
    }
  }

  if (errors.length > 0 || !declared || !category) return { ok: false, errors, sniffed };
  return { ok: true, contentType: declared, category, sniffed };
}

/** The 400 `validation_error` (D25) for a failed upload check. */
export function uploadCheckError(result: Extract<UploadCheckResult, { ok: false }>): ApiError {
  const first = result.errors[0];
  return errors.validation(first ? first.message : 'The uploaded file was refused.', result.errors);
}
