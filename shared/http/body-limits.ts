/**
 * The size limit of every request body, the same locally and deployed (D61): 4 MiB. Deployed, the
 * API's web ACL refuses a larger declared body (Content-Length) before API Gateway invokes the
 * function (lib/edges/waf.ts), and the local HTTP front refuses it the same way (local/http-limits.ts).
 * Below it every body reaches its function: 4 MiB base64-encoded, with the largest headers API
 * Gateway passes, stays under Lambda's 6 MB, which would otherwise refuse the invocation and leave
 * API Gateway to answer a bare 5xx.
 */
import { ApiError } from '../errors';
import { isMultipart, MAX_MULTIPART_BODY_BYTES, multipartTooLarge } from '../work/upload-limits';

/** Every request body: a multipart upload's 4 MiB (D61) is the limit of the others too. */
export const MAX_BODY_BYTES = MAX_MULTIPART_BODY_BYTES;

/** 413 for a body over the limit that is not a multipart upload. */
export function bodyTooLarge(): ApiError {
  return new ApiError(413, 'invalid_request', `The request body may be at most ${MAX_BODY_BYTES} bytes (4 MiB).`, [
    { field: 'body', code: 'body_too_large', message: `at most ${MAX_BODY_BYTES} bytes` },
  ]);
}

/** The refusal of a body over the limit: a multipart upload is pointed to the pre-signed upload. */
export function bodyOverLimit(contentType: string | undefined | null): ApiError {
  return isMultipart(contentType) ? multipartTooLarge() : bodyTooLarge();
}
