/**
 * The multipart calls as S3 answers them, where s3rver does not (it assembles whatever part
 * numbers it is given, of any size, whatever their ETags; it stores a part for an upload id it
 * never issued; it has no AbortMultipartUpload): without this a multipart upload that S3 refuses
 * would pass every local run. The verifying front (s3-front.ts) asks this module before it passes
 * a multipart call on, reading the parts s3rver stored on disk (so the checks survive a restart):
 *
 * - an upload id s3rver never issued (or already completed or aborted): 404 `NoSuchUpload`;
 * - a part number outside 1..10,000: 400 `InvalidArgument`;
 * - CompleteMultipartUpload: the parts listed in ascending order of part number, else 400
 *   `InvalidPartOrder`; every listed part stored, with the ETag its upload answered (the MD5 of its
 *   bytes), else 400 `InvalidPart`; every part but the last at least 5 MiB, else 400
 *   `EntityTooSmall`;
 * - AbortMultipartUpload: the parts are deleted, 204.
 */
import { createHash } from 'node:crypto';
import { createReadStream, existsSync, readFileSync } from 'node:fs';
import { rm, stat } from 'node:fs/promises';
import { join } from 'node:path';

export const MIN_PART_BYTES = 5 * 1024 * 1024;
const MAX_PART_NUMBER = 10_000;

export interface MultipartAnswer {
  ok: false;
  status: number;
  code: string;
  message: string;
}

/** `key`: the object key the request names (path style: the path after the bucket). */
export type MultipartCall = { key: string; uploadId: string } & ({ kind: 'part'; partNumber: string } | { kind: 'complete' | 'abort' });

/** A multipart call on an upload (a part, the completion, the abort), or null for any other request. */
export function multipartCall(method: string, url: string): MultipartCall | null {
  const u = new URL(url, 'http://local');
  const uploadId = u.searchParams.get('uploadId');
  if (uploadId === null) return null;
  let key: string;
  try {
    key = decodeURIComponent(u.pathname.split('/').slice(2).join('/'));
  } catch {
    key = '';
  }
  if (method === 'PUT' && u.searchParams.has('partNumber')) return { kind: 'part', key, uploadId, partNumber: u.searchParams.get('partNumber')! };
  if (method === 'POST') return { kind: 'complete', key, uploadId };
  if (method === 'DELETE') return { kind: 'abort', key, uploadId };
  return null;
}

const noSuchUpload: MultipartAnswer = {
  ok: false,
  status: 404,
  code: 'NoSuchUpload',
  message: 'The specified upload does not exist. The upload ID may be invalid, or the upload may have been aborted or completed.',
};

const md5Of = (path: string) =>
  new Promise<string>((resolve, reject) => {
    const h = createHash('md5');
    createReadStream(path)
      .on('data', (c) => h.update(c))
      .on('end', () => resolve(h.digest('hex')))
      .on('error', reject);
  });

export class MultipartUploads {
  /** `uploadsDir`: where s3rver keeps the bucket's open uploads, one folder per upload id. */
  constructor(private readonly uploadsDir: string) {}

  /** The upload's folder, when s3rver issued this id for this key (S3 ties an upload id to its key). */
  private folder(call: Pick<MultipartCall, 'key' | 'uploadId'>): string | null {
    // s3rver's ids are 32 hex digits; anything else cannot name one of its folders.
    if (!/^[0-9a-f]{32}$/.test(call.uploadId)) return null;
    const dir = join(this.uploadsDir, call.uploadId);
    const keyFile = join(dir, 'key');
    return existsSync(keyFile) && readFileSync(keyFile, 'utf8') === call.key ? dir : null;
  }

  /** Checks a part or a completion before it is passed on; null when it may pass. */
  async check(call: MultipartCall, body: Buffer | null): Promise<MultipartAnswer | null> {
    const dir = this.folder(call);
    if (!dir) return noSuchUpload;
    if (call.kind === 'part') {
      const n = Number(call.partNumber);
      if (!/^\d+$/.test(call.partNumber) || n < 1 || n > MAX_PART_NUMBER) {
        return { ok: false, status: 400, code: 'InvalidArgument', message: `Part number must be an integer between 1 and ${MAX_PART_NUMBER}, inclusive` };
      }
      return null;
    }
    if (call.kind !== 'complete' || !body) return null;
    const listed = [...body.toString('utf8').matchAll(/<Part>([\s\S]*?)<\/Part>/g)].map((m) => ({
      partNumber: Number(/<PartNumber>\s*(\d+)\s*<\/PartNumber>/.exec(m[1]!)?.[1] ?? NaN),
      etag: (/<ETag>([\s\S]*?)<\/ETag>/.exec(m[1]!)?.[1] ?? '').replace(/&quot;/g, '"').replace(/"/g, ''),
    }));
    if (listed.length === 0) return null; // s3rver answers MalformedXML itself
    for (let i = 1; i < listed.length; i++) {
      if (!(listed[i]!.partNumber > listed[i - 1]!.partNumber)) {
        return { ok: false, status: 400, code: 'InvalidPartOrder', message: 'The list of parts was not in ascending order. Parts must be ordered by part number.' };
      }
    }
    const sizes: number[] = [];
    for (const p of listed) {
      const file = join(dir, String(p.partNumber));
      const size = Number.isInteger(p.partNumber) ? await stat(file).then((s) => s.size, () => null) : null;
      if (size === null || (await md5Of(file)) !== p.etag) {
        return {
          ok: false,
          status: 400,
          code: 'InvalidPart',
          message: "One or more of the specified parts could not be found. The part may not have been uploaded, or the specified entity tag may not match the part's entity tag.",
        };
      }
      sizes.push(size);
    }
    if (sizes.slice(0, -1).some((s) => s < MIN_PART_BYTES)) {
      return { ok: false, status: 400, code: 'EntityTooSmall', message: 'Your proposed upload is smaller than the minimum allowed size' };
    }
    return null;
  }

  /** AbortMultipartUpload (s3rver has none): the upload's parts deleted; false when there was no such upload. */
  async abort(call: Pick<MultipartCall, 'key' | 'uploadId'>): Promise<boolean> {
    const dir = this.folder(call);
    if (!dir) return false;
    await rm(dir, { recursive: true, force: true });
    return true;
  }
}

/** The folder s3rver keeps a bucket's open uploads in (its filesystem store's layout). */
export function s3rverUploadsDir(storeDirectory: string, bucket: string): string {
  return join(storeDirectory, bucket, '._S3rver_uploads');
}
