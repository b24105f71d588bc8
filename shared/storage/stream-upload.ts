/**
 * A stream of bytes of unknown length written to one object, as `@aws-sdk/lib-storage`'s `Upload`
 * writes it, over the bucket's small object client (object-client.ts) instead of the S3 SDK:
 *
 * - the bytes are cut into parts of at least `partSize` (S3 refuses a part under 5 MiB unless it is
 *   the last), at most `queueSize` parts in flight, so memory stays about (queueSize + 1) × partSize
 *   whatever the object's size;
 * - a stream that ends before its first part is full is one PutObject, no multipart upload;
 * - on any failure the parts in flight are let finish, the upload is aborted (its parts deleted,
 *   as lib-storage's `leavePartsOnError: false`) and the failure is thrown.
 *
 * Each call is retried by the small client as the SDK retries it (a part is a Buffer, sent again
 * whole).
 */
export interface MultipartTarget {
  putObject(key: string, body: Buffer, contentType: string): Promise<void>;
  createMultipartUpload(key: string, contentType: string): Promise<string>;
  uploadPart(key: string, uploadId: string, partNumber: number, body: Buffer): Promise<string>;
  completeMultipartUpload(key: string, uploadId: string, parts: { partNumber: number; etag: string }[]): Promise<void>;
  abortMultipartUpload(key: string, uploadId: string): Promise<void>;
}

/** S3's limits: parts 1..10,000, each but the last at least 5 MiB. */
export const MAX_PARTS = 10_000;
export const MIN_PART_SIZE = 5 * 1024 * 1024;

export interface StreamUploadOptions {
  partSize: number;
  queueSize: number;
  /** Told when an abort after a failure fails too (the parts then wait for the bucket's lifecycle rule). */
  onAbortFailed?: (err: unknown) => void;
}

export async function uploadStream(
  target: MultipartTarget,
  key: string,
  contentType: string,
  chunks: AsyncIterable<Uint8Array>,
  opts: StreamUploadOptions,
): Promise<{ sizeBytes: number; parts: number }> {
  if (opts.partSize < MIN_PART_SIZE) throw new RangeError(`partSize must be at least ${MIN_PART_SIZE} bytes`);
  let buffered: Buffer[] = [];
  let bufferedBytes = 0;
  let sizeBytes = 0;
  let uploadId: string | null = null;
  let nextPart = 1;
  const done: { partNumber: number; etag: string }[] = [];
  // A part leaves this set when it succeeds; a failed one stays, so the next wait on the set throws.
  const inFlight = new Set<Promise<void>>();
  const failure: { err?: unknown; failed: boolean } = { failed: false };
  const take = () => {
    const body = Buffer.concat(buffered, bufferedBytes);
    buffered = [];
    bufferedBytes = 0;
    return body;
  };
  const send = async (body: Buffer) => {
    uploadId ??= await target.createMultipartUpload(key, contentType);
    const partNumber = nextPart++;
    if (partNumber > MAX_PARTS) throw new RangeError(`the object needs more than ${MAX_PARTS} parts of ${opts.partSize} bytes`);
    const id = uploadId;
    const part: Promise<void> = target.uploadPart(key, id, partNumber, body).then(
      (etag) => {
        inFlight.delete(part);
        done.push({ partNumber, etag });
      },
      (err: unknown) => {
        if (!failure.failed) Object.assign(failure, { failed: true, err });
        throw err;
      },
    );
    part.catch(() => undefined); // awaited below; a failure surfaces there
    inFlight.add(part);
  };
  try {
    for await (const chunk of chunks) {
      if (failure.failed) throw failure.err; // stop reading once a part has failed
      if (chunk.byteLength === 0) continue;
      buffered.push(Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength));
      bufferedBytes += chunk.byteLength;
      sizeBytes += chunk.byteLength;
      if (bufferedBytes < opts.partSize) continue;
      await send(take());
      // Backpressure: the stream is read on only once a slot is free (a failed part throws here).
      while (inFlight.size >= opts.queueSize) await Promise.race(inFlight);
    }
    if (uploadId === null) {
      await target.putObject(key, take(), contentType);
      return { sizeBytes, parts: 1 };
    }
    if (bufferedBytes > 0) await send(take());
    await Promise.all(inFlight);
    done.sort((a, b) => a.partNumber - b.partNumber);
    await target.completeMultipartUpload(key, uploadId, done);
    return { sizeBytes, parts: done.length };
  } catch (err) {
    await Promise.allSettled(inFlight);
    if (uploadId !== null) await target.abortMultipartUpload(key, uploadId).catch((abortErr: unknown) => opts.onAbortFailed?.(abortErr));
    throw err;
  }
}
