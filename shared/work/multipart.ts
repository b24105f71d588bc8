/**
 * multipart/form-data parsing for the direct upload (D24), on the buffered request body (API
 * Gateway hands binary bodies over base64-encoded, so the whole body is in memory anyway).
 *
 * Uses busboy 1.x, the well-known streaming parser. (The event signature of busboy 0.3, which s3rver
 * brings, `file(name, stream, filename, encoding, mime)`, is still handled.)
 *
 * File names are read as UTF-8: browsers and HTTP clients send `filename="café.jpg"` as raw UTF-8
 * bytes (the HTML standard's form encoding), which busboy's default, Latin-1, would turn into
 * `cafÃ©.jpg`. A `filename*=` parameter (RFC 5987) names its own charset and wins either way.
 */
import { Readable } from 'node:stream';
import { errors } from '../errors';

export interface MultipartFile {
  field: string;
  filename: string;
  contentType: string;
  data: Buffer;
  truncated: boolean;
}

export interface MultipartBody {
  files: MultipartFile[];
  fields: Record<string, string>;
}

type BusboyLike = NodeJS.WritableStream & {
  on(ev: 'file', fn: (name: string, stream: Readable & { truncated?: boolean }, a: unknown, b?: unknown, c?: unknown) => void): BusboyLike;
  on(ev: 'field', fn: (name: string, value: string, ...rest: unknown[]) => void): BusboyLike;
  on(ev: 'filesLimit' | 'fieldsLimit' | 'partsLimit' | 'finish' | 'close', fn: () => void): BusboyLike;
  on(ev: 'error', fn: (err: Error) => void): BusboyLike;
};

// eslint-disable-next-line @typescript-eslint/no-require-imports
const busboy = require('busboy') as (opts: { headers: Record<string, string>; defParamCharset?: string; limits?: Record<string, number> }) => BusboyLike;

export async function parseMultipart(
  body: Buffer,
  contentType: string,
  limits: { files: number; fileSize: number; fields?: number },
): Promise<MultipartBody> {
  const bad = (message: string, code = 'invalid_multipart') => errors.validation(message, [{ field: 'file', message, code }]);
  let bb: BusboyLike;
  try {
    bb = busboy({ headers: { 'content-type': contentType }, defParamCharset: 'utf8', limits: { files: limits.files, fileSize: limits.fileSize, fields: limits.fields ?? 20, parts: limits.files + (limits.fields ?? 20) } });
  } catch {
    throw bad('The multipart body has no boundary.');
  }
  return new Promise<MultipartBody>((resolve, reject) => {
    const files: MultipartFile[] = [];
    const fields: Record<string, string> = {};
    const pending: Promise<void>[] = [];
    let failure: Error | null = null;
    let settled = false;
    bb.on('file', (name, stream, a, _b, c) => {
      const info = typeof a === 'object' && a !== null ? (a as { filename?: string; mimeType?: string }) : { filename: a as string, mimeType: c as string };
      const chunks: Buffer[] = [];
      pending.push(
        new Promise<void>((done) => {
          stream.on('data', (d: Buffer) => chunks.push(d));
          stream.on('end', () => {
            files.push({
              field: name,
              filename: info.filename || 'upload',
              contentType: info.mimeType || 'application/octet-stream',
              data: Buffer.concat(chunks),
              truncated: stream.truncated === true,
            });
            done();
          });
          stream.on('error', () => done());
        }),
      );
    });
    bb.on('field', (name, value) => {
      fields[name] = value;
    });
    bb.on('filesLimit', () => (failure ??= bad(`At most ${limits.files} files may be sent.`, 'too_many_files')));
    bb.on('fieldsLimit', () => (failure ??= bad('Too many form fields.')));
    bb.on('error', (err) => {
      if (settled) return;
      settled = true;
      reject(bad(`The multipart body is malformed: ${err.message}`));
    });
    const finish = () => {
      if (settled) return;
      settled = true;
      Promise.all(pending).then(() => (failure ? reject(failure) : resolve({ files, fields })), reject);
    };
    bb.on('finish', finish);
    bb.on('close', finish);
    Readable.from([body]).pipe(bb);
  });
}
