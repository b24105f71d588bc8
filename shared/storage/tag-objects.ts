/**
 * Tagging objects of the media bucket with their verdict, with a given S3 client: shared by
 * shared/storage/s3.ts (which loads the S3 SDK on first use) and the cancellations consumer (which
 * tags on nearly every message, so imports the SDK statically: shared/work/cancelled-job.ts).
 *
 * The lifecycle rule of the bucket (lib/data.ts) expires objects tagged `verdict=rejected`: the
 * bytes of a rejected submission are deleted once the 7-day override window has passed; an
 * override that approves them sets the tag back to `approved`, which no rule expires (D71).
 */
import type { PutObjectTaggingCommand, S3Client } from '@aws-sdk/client-s3';

export const VERDICT_TAG_KEY = 'verdict';

/** Replaces the objects' tag set with `verdict=<value>`. A missing object is skipped. */
export async function tagKeys(client: S3Client, Command: typeof PutObjectTaggingCommand, bucket: string, keys: string[], value: 'rejected' | 'approved'): Promise<void> {
  await Promise.all(
    keys.map(async (Key) => {
      try {
        await client.send(new Command({ Bucket: bucket, Key, Tagging: { TagSet: [{ Key: VERDICT_TAG_KEY, Value: value }] } }));
      } catch (err) {
        const e = err as { name?: string; $metadata?: { httpStatusCode?: number } };
        if (e.name === 'NoSuchKey' || e.$metadata?.httpStatusCode === 404) return;
        throw err;
      }
    }),
  );
}
