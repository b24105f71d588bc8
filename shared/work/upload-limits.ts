/**
 * D61: the size limit of a direct (multipart) upload. A deployed Lambda receives at most 6 MB and
 * API Gateway hands binary bodies over base64-encoded (4 bytes for every 3), so a multipart body
 * above 4 MiB would not reach the function at all; bigger files take the pre-signed upload.
 * Checked by the upload routes (the deployed path) and, earlier, by the local HTTP front.
 */
import { ApiError } from '../errors';

/** 4 MiB: the whole multipart body, every file and field included. */
export const MAX_MULTIPART_BODY_BYTES = 4 * 1024 * 1024;

export const USE_PRESIGNED_UPLOAD = 'use_presigned_upload';

export const multipartTooLargeMessage = () =>
  `A multipart upload body may be at most ${MAX_MULTIPART_BODY_BYTES} bytes (4 MiB). For larger files send JSON {files:[{filename, content_type, size_bytes}]} to the same route and PUT each file to the pre-signed URL it returns.`;

/** 413 `invalid_request` with `details[0].code = 'use_presigned_upload'`. */
export function multipartTooLarge(): ApiError {
  const message = multipartTooLargeMessage();
  return new ApiError(413, 'invalid_request', message, [{ field: 'file', code: USE_PRESIGNED_UPLOAD, message: 'use the pre-signed upload for bodies above 4 MiB' }]);
}

export function isMultipart(contentType: string | undefined | null): boolean {
  return (contentType ?? '').toLowerCase().trimStart().startsWith('multipart/form-data');
}
