/**
 * The media bucket: object keys of the pipeline, object reads and writes (object-client.ts),
 * pre-signed upload URLs and (through shared/cdn) the download URLs.
 *
 * Object layout (BUCKET_PREFIXES in the wiring; only `uploads/` starts the pipeline, D54):
 *   uploads/<sub_id>/<round>/<file_id><ext>     the worker's bytes (round = one upload attempt)
 *   keyframes/<file_id>/<index>.png              video keyframes (spec "Keyframe")
 */
import { config } from '../config';
import { current } from './s3-current';
import { ObjectClient } from './object-client';
import { uploadStream, type StreamUploadOptions } from './stream-upload';
import { resetUploadSigner, uploadSigningCredentials } from './upload-signer';
import { addMs, now } from '../clock';
import { BUCKET_PREFIXES } from '../manifest/wiring';
import { DOWNLOAD_URL_TTL_SECONDS, signDownloadUrl, type DownloadUrlOptions as CdnUrlOptions, type SignedUrl } from '../cdn';
import { logger } from '../logger';

export { DOWNLOAD_URL_TTL_SECONDS, signDownloadUrl, type SignedUrl };
/** Options of a download URL; `contentType` is accepted for older callers, the stored type is served. */
export type DownloadUrlOptions = CdnUrlOptions & { contentType?: string | null };
/** D24: pre-signed upload URLs (large files) are valid 1 hour. */
export const UPLOAD_URL_TTL_SECONDS = 3600;

/**
 * The bucket's object calls go through a small client over S3's REST API (object-client.ts), not
 * the S3 SDK: the SDK was the largest part of the cold start of every function that reached this
 * module. The exports' multipart uploads too (stream-upload.ts); the SDK's client
 * (shared/storage/s3-client.ts) is left to the local CDN and tests.
 */
let objects: ObjectClient | null = null;
function client(): ObjectClient {
  if (!objects) {
    const c = config();
    objects = new ObjectClient({
      region: c.region,
      bucket: c.bucketName,
      ...(c.s3Endpoint ? { endpoint: c.s3Endpoint, credentials: async () => ({ accessKeyId: 'local', secretAccessKey: 'local' }) } : {}),
    });
  }
  return objects;
}

/** For the local runtime and tests after changing endpoints. */
export function resetS3(): void {
  current.client?.destroy();
  current.client = null;
  objects?.destroy();
  objects = null;
  resetUploadSigner();
}

const EXT: Record<string, string> = {
  'image/jpeg': '.jpg',
  'image/png': '.png',
  'image/webp': '.webp',
  'image/gif': '.gif',
  'audio/mpeg': '.mp3',
  'audio/wav': '.wav',
  'audio/mp4': '.m4a',
  'video/mp4': '.mp4',
  'video/quicktime': '.mov',
};

export const objectKeys = {
  upload: (subId: string, round: string, fileId: string, contentType: string) =>
    `${BUCKET_PREFIXES.uploads}${subId}/${round}/${fileId}${EXT[contentType] ?? ''}`,
  keyframe: (fileId: string, index: number) => `${BUCKET_PREFIXES.keyframes}${fileId}/${index}.png`,
};

/** The object keys of a submission's current round (none before a plan). */
export function roundObjectKeys(sub: { id: string; round?: string | null; uploads?: { file_id: string; content_type: string }[] }): string[] {
  if (!sub.round) return [];
  return (sub.uploads ?? []).map((u) => objectKeys.upload(sub.id, sub.round!, u.file_id, u.content_type));
}

/**
 * Tags bytes no submission will deliver (a round replaced, a reservation or retry window that ended)
 * `verdict=rejected`, for the lifecycle rule; a failure only keeps them longer, so it is logged.
 */
export async function tagUndelivered(keys: string[], context: Record<string, unknown>): Promise<void> {
  if (!keys.length) return;
  await tagVerdict(keys, 'rejected').catch((err: Error) => logger.warn('tagging undelivered bytes failed; they are kept', { error: err, ...context }));
}

/** The keyframes the annotation stage stored for the videos of the submission's round (`keyframes/…`). */
export function roundKeyframeKeys(sub: { uploads?: { file_id: string }[]; parts?: Record<string, { keyframes?: { key: string }[] | null } | undefined> }): string[] {
  return (sub.uploads ?? []).flatMap((u) => (sub.parts?.[u.file_id]?.keyframes ?? []).map((k) => k.key));
}

/** `uploads/<sub>/<round>/<file><ext>` → its parts, or null for any other key. */
export function parseUploadKey(key: string): { subId: string; round: string; fileId: string } | null {
  const m = /^uploads\/(sub_[0-9A-HJKMNP-TV-Z]{26})\/([A-Za-z0-9]+)\/(file_[0-9A-HJKMNP-TV-Z]{26})(\.[a-z0-9]+)?$/.exec(key);
  return m ? { subId: m[1]!, round: m[2]!, fileId: m[3]! } : null;
}

/** Stored objects default to `Content-Disposition: attachment` (download URLs add the file name). */
export async function putObject(key: string, body: Buffer, contentType: string): Promise<void> {
  await client().putObject(key, body, contentType);
}

/** A stream of unknown length to one object: one PutObject, or a multipart upload of `partSize` parts, `queueSize` in flight. */
export async function putObjectStream(
  key: string,
  contentType: string,
  chunks: AsyncIterable<Uint8Array>,
  opts: Omit<StreamUploadOptions, 'onAbortFailed'>,
): Promise<{ sizeBytes: number; parts: number }> {
  return uploadStream(client(), key, contentType, chunks, {
    ...opts,
    onAbortFailed: (err) => logger.warn('aborting a failed multipart upload failed; its parts wait for the lifecycle rule', { key, error: err as Error }),
  });
}

export async function getObjectBytes(key: string): Promise<Buffer> {
  return client().getObject(key);
}

/** Size and type of an object, or null when it does not exist. */
export async function headObject(key: string): Promise<{ size: number; contentType: string | null; lastModified: Date | null } | null> {
  return client().headObject(key);
}

/**
 * The tag the bucket's lifecycle rule reads (lib/data.ts): it expires objects tagged
 * `verdict=rejected`, so the bytes of a rejected submission are deleted 30 days after their upload,
 * past the 7-day override window even for a late verdict (shared/storage/lifecycle.ts); an
 * override that approves them sets the tag back to `approved`, which no rule
 * expires (D71).
 */
export const VERDICT_TAG_KEY = 'verdict';

/** Replaces the objects' tag set with `verdict=<value>`. A missing object is skipped; the keys of those are returned. */
export async function tagVerdict(keys: string[], value: 'rejected' | 'approved'): Promise<string[]> {
  const missing: string[] = [];
  await Promise.all(
    keys.map(async (key) => {
      try {
        await client().putObjectTagging(key, { [VERDICT_TAG_KEY]: value });
      } catch (err) {
        const e = err as { name?: string; $metadata?: { httpStatusCode?: number } };
        if (e.name === 'NoSuchKey' || e.$metadata?.httpStatusCode === 404) return void missing.push(key);
        throw err;
      }
    }),
  );
  return missing;
}

/** Deletes the objects, a few at a time (a missing key counts as deleted). */
export async function deleteObjects(keys: string[]): Promise<void> {
  // One key: a DeleteObject; more: DeleteObjects batches (the same grant, s3:DeleteObject on each key).
  if (keys.length === 1) await client().deleteObject(keys[0]!);
  else if (keys.length > 1) await client().deleteObjects(keys);
}

/**
 * D60: the one function that hands out download URLs (files, keyframes, exports): a CDN signed
 * URL valid 7 days, served with `Content-Disposition: attachment` (and the file name when given)
 * and the type the object was stored with. Kept under this name for the callers of the first round.
 */
export async function presignGet(key: string, opts: DownloadUrlOptions = {}): Promise<SignedUrl> {
  return signDownloadUrl(key, { filename: opts.filename });
}

/**
 * D24/D25/D61: a pre-signed PUT for one large file. Content-Length and Content-Type are signed, so
 * S3 refuses a body of another size or type; no checksum parameter is in the URL (D61), so any client that sends exactly these two headers and the bytes succeeds. The
 * magic bytes are checked by the pipeline when the object lands. `notAfter`: the URL expires then at
 * the latest (the reservation's end: bytes that land later could not complete the upload).
 *
 * The URLs of one plan are signed with the upload-signing role's credentials, assumed once for the
 * plan (upload-signer.ts): a pre-signed URL dies with the credentials that signed it, so
 * `expires_at` is also capped at their expiry and is never later than S3's last accepting moment.
 */
export async function presignUploads(
  files: { key: string; contentType: string; sizeBytes: number }[],
  notAfter?: Date,
): Promise<(SignedUrl & { method: 'PUT'; headers: Record<string, string> })[]> {
  const signer = files.length ? await uploadSigningCredentials() : null;
  // SigV4 dates have whole seconds: sign at one, so `expires_at` is exactly when S3 stops accepting.
  const signedAt = new Date(Math.floor(now().getTime() / 1000) * 1000);
  const seconds = (until: Date) => Math.floor((until.getTime() - signedAt.getTime()) / 1000);
  const ttl = Math.max(1, Math.min(UPLOAD_URL_TTL_SECONDS, notAfter ? seconds(notAfter) : Infinity, signer ? seconds(signer.expiration) : Infinity));
  const expires = addMs(signedAt, ttl * 1000);
  return Promise.all(
    files.map(async (f) => ({
      url: await client().presignPut(f.key, f.contentType, f.sizeBytes, ttl, signedAt, signer ?? undefined),
      method: 'PUT' as const,
      // Sent exactly as signed; If-None-Match makes the URL write once (a second PUT is 412).
      headers: { 'Content-Type': f.contentType, 'Content-Length': String(f.sizeBytes), 'If-None-Match': '*' },
      expires_at: expires.toISOString(),
    })),
  );
}

/** One pre-signed upload URL (presignUploads for one file). */
export async function presignPut(key: string, contentType: string, sizeBytes: number, notAfter?: Date): Promise<SignedUrl & { method: 'PUT'; headers: Record<string, string> }> {
  return (await presignUploads([{ key, contentType, sizeBytes }], notAfter))[0]!;
}
