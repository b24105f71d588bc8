/**
 * Where s3rver's file store (node_modules/s3rver/lib/stores/filesystem.js) answers differently
 * from S3, corrected on the running store:
 *
 * - **An object is written whole.** s3rver streamed a PUT (or a completed multipart upload) into
 *   the object's final file and answered before the bytes reached the disk: a GET or HEAD during a
 *   slow upload saw a part of it (its size too), an upload cut off midway left a partial object,
 *   and a power loss after the answer could cut one. S3 shows an object only once its PUT
 *   succeeded, never a part of one, and keeps it once it answered. Here the bytes go to a
 *   temporary file beside the object (not an object to s3rver's listing), flushed to disk, then
 *   renamed over the object: a reader sees the old object or the new one, and a PUT that fails
 *   leaves the old one.
 * - **Tags belong to the object.** S3 gives an object its tags when it is written (none unless the
 *   request sets them) and deletes them with it; s3rver kept a key's tag file across a PUT and a
 *   delete, so an object written again kept the tags of the one it replaced (a keyframe stored
 *   again over a rejected video's would stay tagged `verdict=rejected` here, and not deployed).
 */
import { createHash, randomUUID } from 'node:crypto';
import { createWriteStream } from 'node:fs';
import { mkdir, open, rename, rm } from 'node:fs/promises';
import { dirname } from 'node:path';
import { Readable, Transform } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import type S3rver from 's3rver';

type Store = S3rver['store'];

/** Flushes a file (or a directory's entries) to disk. */
async function flush(path: string, flags: 'r+' | 'r'): Promise<void> {
  const handle = await open(path, flags);
  try {
    await handle.sync();
  } catch (err) {
    // Some file systems refuse fsync on a directory; the rename is still atomic.
    if (flags === 'r+') throw err;
  } finally {
    await handle.close();
  }
}

export function correctStore(store: Store): void {
  const remove = store.deleteObject.bind(store);
  store.putObject = async (object) => {
    const file = store.getResourcePath(object.bucket, object.key, 'object');
    await mkdir(dirname(file), { recursive: true });
    const partial = `${file}.${randomUUID()}.partial`;
    const md5 = createHash('md5');
    let size = 0;
    try {
      await pipeline(
        Buffer.isBuffer(object.content) ? Readable.from([object.content]) : object.content,
        new Transform({
          transform(chunk: Buffer, _encoding, done) {
            md5.update(chunk);
            size += chunk.length;
            done(null, chunk);
          },
        }),
        createWriteStream(partial),
      );
      await flush(partial, 'r+');
      await rename(partial, file);
    } catch (err) {
      await rm(partial, { force: true });
      throw err;
    }
    await flush(dirname(file), 'r');
    const digest = md5.digest('hex');
    await store.putMetadata(object.bucket, object.key, object.metadata, digest);
    await store.deleteSubresource(object.bucket, object.key, 'tagging');
    return { size, md5: digest };
  };
  store.deleteObject = async (bucket, key) => {
    await remove(bucket, key);
    await store.deleteSubresource(bucket, key, 'tagging');
  };
}
