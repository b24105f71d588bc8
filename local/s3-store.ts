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
 *   renamed over the object: a reader sees the old bytes or the new ones, and a PUT that fails
 *   leaves the old object. Its ETag and metadata follow, each file replaced whole the same way: a
 *   reader of an object being replaced may for a moment see the new bytes with the old ETag and
 *   type (s3rver keeps them in three files; S3 switches all at once). Temporary files a crash left
 *   are removed at the next start (removeCutOffWrites).
 * - **Tags belong to the object.** S3 gives an object its tags when it is written (none unless the
 *   request sets them) and deletes them with it; s3rver kept a key's tag file across a PUT and a
 *   delete, so an object written again kept the tags of the one it replaced (a keyframe stored
 *   again over a rejected video's would stay tagged `verdict=rejected` here, and not deployed).
 */
import { createHash, randomUUID } from 'node:crypto';
import { createWriteStream } from 'node:fs';
import { mkdir, open, readdir, rename, rm, writeFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
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

/** The metadata s3rver keeps of an object (its store's putMetadata): the standard headers and x-amz-meta-*. */
function storedMetadata(metadata: Record<string, string>): Record<string, string> {
  return Object.fromEntries(Object.entries(metadata).filter(([k]) => STORED_HEADERS.has(k) || k.startsWith('x-amz-meta-')));
}
const { ALLOWED_METADATA } = require('s3rver/lib/models/object') as { ALLOWED_METADATA: string[] };
const STORED_HEADERS = new Set(ALLOWED_METADATA);

/** Replaces `file` with `data`: a temporary file, flushed, renamed over it, the directory flushed. */
async function writeDurably(file: string, data: string): Promise<void> {
  const tmp = `${file}.${randomUUID()}.partial`;
  try {
    await writeFile(tmp, data);
    await flush(tmp, 'r+');
    await rename(tmp, file);
  } catch (err) {
    await rm(tmp, { force: true });
    throw err;
  }
  await flush(dirname(file), 'r');
}

/**
 * Removes the temporary files of writes a crash cut off (`*.partial`, never an object to s3rver's
 * listing): the object they were to replace is still there, whole.
 */
export async function removeCutOffWrites(root: string): Promise<number> {
  let removed = 0;
  const walk = async (dir: string): Promise<void> => {
    const entries = await readdir(dir, { withFileTypes: true }).catch(() => []);
    for (const e of entries) {
      const path = join(dir, e.name);
      if (e.isDirectory()) await walk(path);
      else if (e.name.endsWith('.partial')) {
        await rm(path, { force: true });
        removed++;
      }
    }
  };
  await walk(root);
  return removed;
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
    // Its ETag and metadata, each replaced whole and flushed (a crash leaves the old file or the
    // new one, never an empty one that s3rver could not parse); then the tags of the object it
    // replaced go (s3rver keeps them in a file of their own).
    await writeDurably(store.getResourcePath(object.bucket, object.key, 'object.md5'), digest);
    await writeDurably(store.getResourcePath(object.bucket, object.key, 'metadata.json'), JSON.stringify(storedMetadata(object.metadata), null, 2));
    await store.deleteSubresource(object.bucket, object.key, 'tagging');
    return { size, md5: digest };
  };
  store.deleteObject = async (bucket, key) => {
    await remove(bucket, key);
    await store.deleteSubresource(bucket, key, 'tagging');
  };
}
