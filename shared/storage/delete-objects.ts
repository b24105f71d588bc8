/**
 * Deleting many objects of the media bucket at once with the S3 SDK's DeleteObjects, for the
 * withdrawals consumer (shared/work/withdrawn-objects.ts), which deletes on every message. Single
 * objects elsewhere go through the bucket's object client (shared/storage/s3.ts).
 */
import type { DeleteObjectsCommand, S3Client } from '@aws-sdk/client-s3';

/**
 * DeleteObjects, 1,000 keys per request (the API's limit). It answers 200 even when some keys
 * failed, listing them in `Errors` (quiet mode lists only those): any of them throws.
 */
export async function deleteKeys(client: S3Client, Command: typeof DeleteObjectsCommand, bucket: string, keys: string[]): Promise<void> {
  for (let i = 0; i < keys.length; i += 1000) {
    const batch = keys.slice(i, i + 1000);
    const out = await client.send(new Command({ Bucket: bucket, Delete: { Objects: batch.map((Key) => ({ Key })), Quiet: true } }));
    const failed = out.Errors ?? [];
    if (failed.length) throw new Error(`${failed.length} of ${batch.length} objects not deleted: ${failed.slice(0, 3).map((e) => `${e.Key} (${e.Code})`).join(', ')}`);
  }
}
