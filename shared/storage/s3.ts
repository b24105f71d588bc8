/**
 * The media bucket: one S3 client per process (lazy), object keys of the pipeline, and pre-signed
 * URLs. Path-style addressing and the local credentials when `S3_ENDPOINT` is set (the s3rver
 * emulator of the local runtime); the Lambda role's credentials otherwise.
 *
 * Object layout (BUCKET_PREFIXES in the wiring; only `uploads/` starts the pipeline, D54):
 *   uploads/<sub_id>/<round>/<file_id><ext>     the worker's bytes (round = one upload attempt)
 *   keyframes/<file_id>/<index>.png              video keyframes (spec "Keyframe")
 */
import {
  DeleteObjectsCommand,
  GetObjectCommand,
  HeadObjectCommand,
  PutObjectCommand,
  S3Client,
} from '@aws-sdk/client-s3';
import { getSignedUrl } from '@aws-sdk/s3-request-presigner';
import { config } from '../config';
import { addMs, now } from '../clock';
import { BUCKET_PREFIXES } from '../manifest/wiring';

/** D30: download URLs are valid 7 days (also SigV4's maximum). */
export const DOWNLOAD_URL_TTL_SECONDS = 7 * 24 * 3600;
/** D24: pre-signed upload URLs (large files) are valid 1 hour. */
export const UPLOAD_URL_TTL_SECONDS = 3600;

let client: S3Client | null = null;

export function s3(): S3Client {
  if (!client) {
    const c = config();
    client = new S3Client({
      region: c.region,
      ...(c.s3Endpoint
        ? { endpoint: c.s3Endpoint, forcePathStyle: true, credentials: { accessKeyId: 'local', secretAccessKey: 'local' } }
        : {}),
    });
  }
  return client;
}

/** For the local runtime and tests after changing endpoints. */
export function resetS3(): void {
  client?.destroy();
  client = null;
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

export async function putObject(key: string, body: Buffer, contentType: string): Promise<void> {
  await s3().send(new PutObjectCommand({ Bucket: bucket(), Key: key, Body: body, ContentType: contentType, ContentLength: body.length }));
}

export async function getObjectBytes(key: string): Promise<Buffer> {
  const out = await s3().send(new GetObjectCommand({ Bucket: bucket(), Key: key }));
  return Buffer.from(await out.Body!.transformToByteArray());
}

/** Size and type of an object, or null when it does not exist. */
export async function headObject(key: string): Promise<{ size: number; contentType: string | null } | null> {
  try {
    const out = await s3().send(new HeadObjectCommand({ Bucket: bucket(), Key: key }));
    return { size: Number(out.ContentLength ?? 0), contentType: out.ContentType ?? null };
  } catch (err) {
    const e = err as { name?: string; $metadata?: { httpStatusCode?: number } };
    if (e.name === 'NotFound' || e.name === 'NoSuchKey' || e.$metadata?.httpStatusCode === 404) return null;
    throw err;
  }
}

export async function deleteObjects(keys: string[]): Promise<void> {
  if (keys.length === 0) return;
  await s3().send(new DeleteObjectsCommand({ Bucket: bucket(), Delete: { Objects: keys.map((Key) => ({ Key })), Quiet: true } }));
}

export interface SignedUrl {
  url: string;
  expires_at: string;
}

/**
 * D30: a pre-signed GET valid 7 days, served with the worker's file name.
 * Deployed, the URL lives only as long as the credentials that signed it: sign with a dedicated
 * long-lived signing identity (see the pipeline notes), not the Lambda role's session.
 */
export async function presignGet(key: string, opts: { filename?: string | null; contentType?: string | null } = {}): Promise<SignedUrl> {
  const expires = addMs(now(), DOWNLOAD_URL_TTL_SECONDS * 1000);
  const filename = opts.filename?.replace(/["\\\r\n]/g, '_');
  const url = await getSignedUrl(
    s3(),
    new GetObjectCommand({
      Bucket: bucket(),
      Key: key,
      ...(filename ? { ResponseContentDisposition: `attachment; filename="${filename}"` } : {}),
      ...(opts.contentType ? { ResponseContentType: opts.contentType } : {}),
    }),
    { expiresIn: DOWNLOAD_URL_TTL_SECONDS, signingDate: now() },
  );
  return { url, expires_at: expires.toISOString() };
}

/**
 * D24/D25: a pre-signed PUT for one large file. Content-Length and Content-Type are signed, so S3
 * refuses a body of another size or type (the size condition); the magic bytes are checked by the
 * pipeline when the object lands.
 */
export async function presignPut(key: string, contentType: string, sizeBytes: number): Promise<SignedUrl & { method: 'PUT'; headers: Record<string, string> }> {
  const expires = addMs(now(), UPLOAD_URL_TTL_SECONDS * 1000);
  const url = await getSignedUrl(
    s3(),
    new PutObjectCommand({ Bucket: bucket(), Key: key, ContentType: contentType, ContentLength: sizeBytes }),
    { expiresIn: UPLOAD_URL_TTL_SECONDS, signingDate: now(), signableHeaders: new Set(['content-type', 'content-length']) },
  );
  return {
    url,
    method: 'PUT',
    headers: { 'Content-Type': contentType, 'Content-Length': String(sizeBytes) },
    expires_at: expires.toISOString(),
  };
}
