/**
 * The media bucket: object keys of the pipeline, object reads and writes through the one S3 client
 * of the process (shared/storage/s3-client.ts, loaded on first use), pre-signed upload URLs and
 * (through shared/cdn) the download URLs.
 *
 * Object layout (BUCKET_PREFIXES in the wiring; only `uploads/` starts the pipeline, D54):
 *   uploads/<sub_id>/<round>/<file_id><ext>     the worker's bytes (round = one upload attempt)
 *   keyframes/<file_id>/<index>.png              video keyframes (spec "Keyframe")
 */
import { config } from '../config';
import { current } from './s3-current';
import { deleteKeys } from './delete-objects';
import { tagKeys, VERDICT_TAG_KEY } from './tag-objects';
import { addMs, now } from '../clock';
import { BUCKET_PREFIXES } from '../manifest/wiring';
import { DOWNLOAD_URL_TTL_SECONDS, signDownloadUrl, type DownloadUrlOptions as CdnUrlOptions, type SignedUrl } from '../cdn';

export { DOWNLOAD_URL_TTL_SECONDS, signDownloadUrl, type SignedUrl };
/** Options of a download URL; `contentType` is accepted for older callers, the stored type is served. */
export type DownloadUrlOptions = CdnUrlOptions & { contentType?: string | null };
/** D24: pre-signed upload URLs (large files) are valid 1 hour. */
export const UPLOAD_URL_TTL_SECONDS = 3600;

/**
 * The S3 SDK (client, commands, presigner) is loaded on the first call that talks to S3, so
 * handlers that only name object keys or hand out CDN URLs never load it, and the others load it
 * outside their cold start (shared/storage/s3-client.ts).
 */
let sdkModule: typeof import('./s3-client') | null = null;
async function sdk(): Promise<typeof import('./s3-client')> {
  sdkModule ??= await import('./s3-client');
  return sdkModule;
}

/** For the local runtime and tests after changing endpoints. */
export function resetS3(): void {
  current.client?.destroy();
  current.client = null;
}

const bucket = () => config().bucketName;

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

/** `uploads/<sub>/<round>/<file><ext>` → its parts, or null for any other key. */
export function parseUploadKey(key: string): { subId: string; round: string; fileId: string } | null {
  const m = /^uploads\/(sub_[0-9A-HJKMNP-TV-Z]{26})\/([A-Za-z0-9]+)\/(file_[0-9A-HJKMNP-TV-Z]{26})(\.[a-z0-9]+)?$/.exec(key);
  return m ? { subId: m[1]!, round: m[2]!, fileId: m[3]! } : null;
}

/** Stored objects default to `Content-Disposition: attachment` (download URLs add the file name). */
export async function putObject(key: string, body: Buffer, contentType: string): Promise<void> {
  const { s3, PutObjectCommand } = await sdk();
  await s3().send(
    new PutObjectCommand({ Bucket: bucket(), Key: key, Body: body, ContentType: contentType, ContentLength: body.length, ContentDisposition: 'attachment' }),
  );
}

export async function getObjectBytes(key: string): Promise<Buffer> {
  const { s3, GetObjectCommand } = await sdk();
  const out = await s3().send(new GetObjectCommand({ Bucket: bucket(), Key: key }));
  const bytes = await out.Body!.transformToByteArray();
  return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength); // a view, not a second copy
}

/** Size and type of an object, or null when it does not exist. */
export async function headObject(key: string): Promise<{ size: number; contentType: string | null } | null> {
  const { s3, HeadObjectCommand } = await sdk();
  try {
    const out = await s3().send(new HeadObjectCommand({ Bucket: bucket(), Key: key }));
    return { size: Number(out.ContentLength ?? 0), contentType: out.ContentType ?? null };
  } catch (err) {
    const e = err as { name?: string; $metadata?: { httpStatusCode?: number } };
    if (e.name === 'NotFound' || e.name === 'NoSuchKey' || e.$metadata?.httpStatusCode === 404) return null;
    throw err;
  }
}

/** The verdict tag the bucket's lifecycle rule reads (shared/storage/tag-objects.ts). A missing object is skipped. */
export async function tagVerdict(keys: string[], value: 'rejected' | 'approved'): Promise<void> {
  const { s3, PutObjectTaggingCommand } = await sdk();
  await tagKeys(s3(), PutObjectTaggingCommand, bucket(), keys, value);
}

export { VERDICT_TAG_KEY };

/** Deletes the objects (a missing key counts as deleted; shared/storage/delete-objects.ts). */
export async function deleteObjects(keys: string[]): Promise<void> {
  if (keys.length === 0) return;
  const { s3, DeleteObjectsCommand } = await sdk();
  await deleteKeys(s3(), DeleteObjectsCommand, bucket(), keys);
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
 * S3 refuses a body of another size or type; no checksum parameter is in the URL (the client
 * config above), so any client that sends exactly these two headers and the bytes succeeds. The
 * magic bytes are checked by the pipeline when the object lands.
 */
export async function presignPut(key: string, contentType: string, sizeBytes: number): Promise<SignedUrl & { method: 'PUT'; headers: Record<string, string> }> {
  // SigV4 dates have whole seconds: sign at one, so `expires_at` is exactly when S3 stops accepting.
  const signedAt = new Date(Math.floor(now().getTime() / 1000) * 1000);
  const expires = addMs(signedAt, UPLOAD_URL_TTL_SECONDS * 1000);
  const { s3, PutObjectCommand, getSignedUrl } = await sdk();
  const url = await getSignedUrl(
    s3(),
    new PutObjectCommand({ Bucket: bucket(), Key: key, ContentType: contentType, ContentLength: sizeBytes }),
    { expiresIn: UPLOAD_URL_TTL_SECONDS, signingDate: signedAt, signableHeaders: new Set(['content-type', 'content-length']) },
  );
  return {
    url,
    method: 'PUT',
    headers: { 'Content-Type': contentType, 'Content-Length': String(sizeBytes) },
    expires_at: expires.toISOString(),
  };
}
