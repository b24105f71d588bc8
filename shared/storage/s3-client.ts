/**
 * The S3 SDK client of this process, for the local CDN (local/cdn.ts) and tests. No function
 * bundles it: every bucket call of the functions goes through the small object client
 * (object-client.ts, used through shared/storage/s3.ts); a CDK test holds that.
 * Path-style addressing and the local credentials when `S3_ENDPOINT` is set (the s3rver emulator
 * of the local runtime); the Lambda role's otherwise.
 */
import { S3Client } from '@aws-sdk/client-s3';
import { config } from '../config';
import { traced } from '../observability/tracer';
import { current } from './s3-current';

export function s3(): S3Client {
  if (!current.client) {
    const c = config();
    const client = traced(
      new S3Client({
        region: c.region,
        // D61: no flexible checksums unless an operation requires one (DeleteObjects). Otherwise the
        // SDK puts the CRC32 of an EMPTY body into every pre-signed PUT URL, which S3 then refuses
        // for any real body; and no response validation of checksums S3 did not compute.
        requestChecksumCalculation: 'WHEN_REQUIRED',
        responseChecksumValidation: 'WHEN_REQUIRED',
        ...(c.s3Endpoint
          ? { endpoint: c.s3Endpoint, forcePathStyle: true, credentials: { accessKeyId: 'local', secretAccessKey: 'local' } }
          : {}),
      }),
    );
    current.client = client;
  }
  return current.client as S3Client;
}
