/**
 * The media bucket's object calls over S3's REST API, without the S3 SDK.
 *
 * Why: the S3 SDK (its client, schemas, endpoint rules, checksum and XML code: about 195 KB of a
 * bundle) is evaluated or at least parsed by every function that reaches it, lazily imported or
 * not, and it was the largest part of the cold start of the upload, retry and override routes and
 * of the pipeline consumers (docs/benchmarks.md). These functions use a few operations on one bucket
 * with known keys: PutObject, GetObject, HeadObject, DeleteObject, DeleteObjects (the
 * withdrawals' batches), PutObjectTagging, a pre-signed PutObject URL, and the four calls of a
 * multipart upload (the exports, through shared/storage/stream-upload.ts).
 *
 * Nothing here is hand-rolled that the SDK already does: every call goes through
 * shared/aws/signed-call.ts (the SDK's own Signature V4 signer, HTTP handler, standard retry
 * strategy and credential chain, checked and traced like any SDK call). No function bundles the S3
 * SDK (a CDK test holds that); only the local CDN and tests use it.
 *
 * Held by tests: the pre-signed URL equals the SDK presigner's for the same input; every call is
 * verified by the local runtime's Signature V4 front (local/s3-front.ts) as S3 verifies it.
 */
import { createHash } from 'node:crypto';
import type { AwsCredentialIdentity, AwsCredentialIdentityProvider } from '@smithy/types';
import { Sha256 } from '@smithy/core/checksum';
import { SignatureV4 } from '@smithy/signature-v4';
import { partition } from '@aws-sdk/core/client';
import { buildQueryString, extendedEncodeURIComponent } from '@smithy/core/protocols';
import { checkCall } from '../observability/invocation';
import { AwsServiceError, HttpRequest, SignedClient, USER_AGENT, type SignedAnswer } from '../aws/signed-call';
import { xmlEscape, xmlField } from '../aws/xml';

export interface ObjectClientOptions {
  region: string;
  bucket: string;
  /** A path-style endpoint (the local emulator) instead of the bucket's virtual host. */
  endpoint?: string;
  credentials?: AwsCredentialIdentityProvider;
}

/** An error S3 answered, shaped like the SDK's (a network failure is rethrown as it came, with `$metadata`). */
export { AwsServiceError as S3Error };

interface Call {
  operation:
    | 'PutObject'
    | 'GetObject'
    | 'HeadObject'
    | 'DeleteObject'
    | 'PutObjectTagging'
    | 'DeleteObjects'
    | 'CreateMultipartUpload'
    | 'UploadPart'
    | 'CompleteMultipartUpload'
    | 'AbortMultipartUpload';
  method: 'PUT' | 'GET' | 'HEAD' | 'DELETE' | 'POST';
  /** The object's key; null for a call on the bucket itself (DeleteObjects). */
  key: string | null;
  /** The SDK command's input, for the grant check; by default the bucket and the key. */
  input?: Record<string, unknown>;
  query?: Record<string, string>;
  headers?: Record<string, string>;
  body?: Buffer;
}

const SIGNED_UPLOAD_HEADERS = new Set(['content-type', 'content-length', 'if-none-match']);

const md5 = (b: Buffer) => createHash('md5').update(b).digest('base64');


/** S3's error document (`<Error><Code>…`); a HEAD answer has no body, so its status names it. */
function readS3Error(status: number, _headers: Record<string, string>, body: Uint8Array) {
  const xml = Buffer.from(body).toString('utf8');
  const code = xmlField(xml, 'Code') ?? (status === 404 ? 'NotFound' : status === 403 ? 'Forbidden' : `Http${status}`);
  return { code, message: xmlField(xml, 'Message') ?? `answered ${status}` };
}

export class ObjectClient {
  private readonly calls: SignedClient;
  private readonly origin: URL;
  private readonly pathPrefix: string;

  constructor(private readonly opts: ObjectClientOptions) {
    this.calls = new SignedClient({
      service: 's3',
      region: opts.region,
      credentials: opts.credentials,
      // S3 signs the path as sent (no second encoding), as the SDK's S3 client does.
      uriEscapePath: false,
      // A stalled socket fails (and is retried) instead of holding the invocation.
      socketTimeoutMs: 30_000,
      readError: readS3Error,
    });
    // Virtual-hosted style deployed, in the region's partition (amazonaws.com, .com.cn, .eu, …, from
    // the SDK's partition table): what the SDK builds for this bucket and region. Path style for
    // the local emulator, and for a bucket name a virtual host cannot carry (dots, upper case, _).
    // FIPS and dual-stack endpoints are not built (the stack uses neither).
    const pathStyle = Boolean(opts.endpoint) || !/^[a-z0-9][a-z0-9-]{1,61}[a-z0-9]$/.test(opts.bucket);
    const host = `s3.${opts.region}.${partition(opts.region).dnsSuffix}`;
    this.origin = new URL(opts.endpoint ?? (pathStyle ? `https://${host}` : `https://${opts.bucket}.${host}`));
    this.pathPrefix = pathStyle ? `/${extendedEncodeURIComponent(opts.bucket)}` : '';
  }

  private request(call: Pick<Call, 'method' | 'key' | 'query' | 'headers' | 'body'>): HttpRequest {
    const base = `${this.origin.pathname.replace(/\/$/, '')}${this.pathPrefix}`;
    // A bucket call goes to the bucket's root, as the SDK sends it: `/` on its virtual host, `/<bucket>` path style.
    const path = call.key === null ? base || '/' : `${base}/${call.key.split('/').map(extendedEncodeURIComponent).join('/')}`;
    const port = this.origin.port ? Number(this.origin.port) : undefined;
    return new HttpRequest({
      protocol: this.origin.protocol,
      hostname: this.origin.hostname,
      port,
      method: call.method,
      path,
      query: call.query ?? {},
      // The user agent (unsigned) names this client in the bucket's server access logs.
      headers: { host: `${this.origin.hostname}${port !== undefined ? `:${port}` : ''}`, 'user-agent': USER_AGENT, ...call.headers },
      body: call.body,
    });
  }

  private send(call: Call): Promise<SignedAnswer> {
    return this.calls.send({
      clientName: 'S3Client',
      commandName: `${call.operation}Command`,
      input: call.input ?? { Bucket: this.opts.bucket, Key: call.key },
      request: (traceHeaders) => this.request({ ...call, headers: { ...call.headers, ...traceHeaders } }),
    });
  }

  /** Stored objects default to `Content-Disposition: attachment`; S3 checks the body's MD5. */
  async putObject(key: string, body: Buffer, contentType: string): Promise<void> {
    await this.send({
      operation: 'PutObject',
      method: 'PUT',
      key,
      headers: { 'content-type': contentType, 'content-length': String(body.length), 'content-disposition': 'attachment', 'content-md5': md5(body) },
      body,
    });
  }

  async getObject(key: string): Promise<Buffer> {
    const { body } = await this.send({ operation: 'GetObject', method: 'GET', key });
    return Buffer.from(body.buffer, body.byteOffset, body.byteLength); // a view, not a second copy
  }

  /** Size and type, or null when the object does not exist. */
  async headObject(key: string): Promise<{ size: number; contentType: string | null; lastModified: Date | null } | null> {
    try {
      const { headers } = await this.send({ operation: 'HeadObject', method: 'HEAD', key });
      const modified = headers['last-modified'] ? new Date(headers['last-modified']) : null;
      return {
        size: Number(headers['content-length'] ?? 0),
        contentType: headers['content-type'] ?? null,
        // When the object landed (whole seconds, as S3 gives it).
        lastModified: modified && !Number.isNaN(modified.getTime()) ? modified : null,
      };
    } catch (err) {
      if ((err as AwsServiceError).$metadata?.httpStatusCode === 404) return null;
      throw err;
    }
  }

  /** A missing key counts as deleted (S3 answers 204 either way). */
  async deleteObject(key: string): Promise<void> {
    await this.send({ operation: 'DeleteObject', method: 'DELETE', key });
  }

  /**
   * DeleteObjects, 1,000 keys per request (the API's limit), in quiet mode. S3 answers 200 even
   * when some keys failed, listing only those: any of them throws. A missing key counts as deleted.
   */
  async deleteObjects(keys: string[]): Promise<void> {
    for (let i = 0; i < keys.length; i += 1000) {
      const batch = keys.slice(i, i + 1000);
      const objects = batch.map((k) => `<Object><Key>${xmlEscape(k)}</Key></Object>`).join('');
      const body = Buffer.from(`<?xml version="1.0" encoding="UTF-8"?><Delete xmlns="http://s3.amazonaws.com/doc/2006-03-01/">${objects}<Quiet>true</Quiet></Delete>`);
      const { body: answer } = await this.send({
        operation: 'DeleteObjects',
        method: 'POST',
        key: null,
        input: { Bucket: this.opts.bucket, Delete: { Objects: batch.map((Key) => ({ Key })), Quiet: true } },
        query: { delete: '' },
        headers: { 'content-type': 'application/xml', 'content-length': String(body.length), 'content-md5': md5(body) },
        body,
      });
      const failed = [...Buffer.from(answer).toString('utf8').matchAll(/<Error>([\s\S]*?)<\/Error>/g)].map((m) => `${xmlField(m[1]!, 'Key')} (${xmlField(m[1]!, 'Code')})`);
      if (failed.length) throw new Error(`${failed.length} of ${batch.length} objects not deleted: ${failed.slice(0, 3).join(', ')}`);
    }
  }

  /** Replaces the object's tag set. S3 requires the body's MD5 (or a checksum) for this call. */
  async putObjectTagging(key: string, tags: Record<string, string>): Promise<void> {
    const tagSet = Object.entries(tags)
      .map(([k, v]) => `<Tag><Key>${xmlEscape(k)}</Key><Value>${xmlEscape(v)}</Value></Tag>`)
      .join('');
    const body = Buffer.from(`<?xml version="1.0" encoding="UTF-8"?><Tagging xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><TagSet>${tagSet}</TagSet></Tagging>`);
    await this.send({
      operation: 'PutObjectTagging',
      method: 'PUT',
      key,
      query: { tagging: '' },
      headers: { 'content-type': 'application/xml', 'content-length': String(body.length), 'content-md5': md5(body) },
      body,
    });
  }

  /** CreateMultipartUpload: the upload's id. The object will be `Content-Disposition: attachment`, as `putObject`'s. */
  async createMultipartUpload(key: string, contentType: string): Promise<string> {
    const { body, $metadata } = await this.send({
      operation: 'CreateMultipartUpload',
      method: 'POST',
      key,
      input: { Bucket: this.opts.bucket, Key: key, ContentType: contentType },
      query: { uploads: '' },
      headers: { 'content-type': contentType, 'content-disposition': 'attachment' },
    });
    const id = xmlField(Buffer.from(body).toString('utf8'), 'UploadId');
    if (!id) throw new AwsServiceError('InvalidResponse', 'CreateMultipartUpload answered without an UploadId', $metadata);
    return id;
  }

  /** UploadPart (1..10,000): the part's ETag, as CompleteMultipartUpload wants it back. The signed payload hash covers the body. */
  async uploadPart(key: string, uploadId: string, partNumber: number, body: Buffer): Promise<string> {
    const { headers, $metadata } = await this.send({
      operation: 'UploadPart',
      method: 'PUT',
      key,
      input: { Bucket: this.opts.bucket, Key: key, UploadId: uploadId, PartNumber: partNumber },
      query: { partNumber: String(partNumber), uploadId },
      headers: { 'content-length': String(body.length) },
      body,
    });
    const etag = headers['etag'];
    if (!etag) throw new AwsServiceError('InvalidResponse', `UploadPart ${partNumber} answered without an ETag`, $metadata);
    return etag;
  }

  /**
   * CompleteMultipartUpload with the parts in ascending order. S3 can answer 200 and still fail
   * (an `<Error>` document in the body, after it has started answering): that is thrown as S3's
   * error, and retried like the SDK retries it when S3 names it a server error.
   */
  async completeMultipartUpload(key: string, uploadId: string, parts: { partNumber: number; etag: string }[]): Promise<void> {
    const xml = parts.map((p) => `<Part><PartNumber>${p.partNumber}</PartNumber><ETag>${xmlEscape(p.etag)}</ETag></Part>`).join('');
    const body = Buffer.from(`<?xml version="1.0" encoding="UTF-8"?><CompleteMultipartUpload xmlns="http://s3.amazonaws.com/doc/2006-03-01/">${xml}</CompleteMultipartUpload>`);
    for (let attempt = 1; ; attempt++) {
      const answer = await this.send({
        operation: 'CompleteMultipartUpload',
        method: 'POST',
        key,
        input: { Bucket: this.opts.bucket, Key: key, UploadId: uploadId, MultipartUpload: { Parts: parts.map((p) => ({ PartNumber: p.partNumber, ETag: p.etag })) } },
        query: { uploadId },
        headers: { 'content-type': 'application/xml', 'content-length': String(body.length) },
        body,
      });
      const text = Buffer.from(answer.body).toString('utf8');
      if (!/<Error>/.test(text)) return;
      const { code, message } = readS3Error(500, {}, answer.body);
      const err = new AwsServiceError(code, message, { ...answer.$metadata, httpStatusCode: 200 });
      if (attempt >= 3 || !['InternalError', 'SlowDown', 'ServiceUnavailable'].includes(code)) throw err;
    }
  }

  /** AbortMultipartUpload: the parts stored so far are deleted. An upload already gone counts as aborted. */
  async abortMultipartUpload(key: string, uploadId: string): Promise<void> {
    try {
      await this.send({ operation: 'AbortMultipartUpload', method: 'DELETE', key, input: { Bucket: this.opts.bucket, Key: key, UploadId: uploadId }, query: { uploadId } });
    } catch (err) {
      if ((err as AwsServiceError).name !== 'NoSuchUpload') throw err;
    }
  }

  /**
   * A pre-signed PutObject URL, as the SDK's presigner builds it (with `signWith`, signed with those
 * credentials instead of the client's): Content-Type, Content-Length and
   * `If-None-Match: *` signed (a conditional write: S3 refuses it with 412 once the key holds an
   * object, so the URL writes once and the bytes that were checked stay the bytes delivered), the
   * payload unsigned, no checksum parameter. Signing is local (no call, no trace), but
   * the URL carries the function's grant, so the local runtime checks it as it checks a PutObject.
   */
  async presignPut(key: string, contentType: string, sizeBytes: number, expiresIn: number, signingDate: Date, signWith?: AwsCredentialIdentity): Promise<string> {
    checkCall('S3Client', 'PutObjectCommand', { Bucket: this.opts.bucket, Key: key });
    const req = this.request({
      method: 'PUT',
      key,
      query: { 'x-id': 'PutObject' },
      // Named as the SDK's presigner names it: the header is hoisted into the query by that name.
      headers: { 'content-type': contentType, 'content-length': String(sizeBytes), 'if-none-match': '*', 'X-Amz-Content-Sha256': 'UNSIGNED-PAYLOAD' },
    });
    // Signed with the given credentials (the upload-signing role's) when there are some.
    const signer = signWith ? new SignatureV4({ credentials: signWith, region: this.opts.region, service: 's3', sha256: Sha256, uriEscapePath: false }) : this.calls.signer;
    const signed = await signer.presign(req, { expiresIn, signingDate, signableHeaders: SIGNED_UPLOAD_HEADERS, unsignableHeaders: new Set(['content-type']) });
    const port = signed.port !== undefined ? `:${signed.port}` : '';
    return `${signed.protocol}//${signed.hostname}${port}${signed.path}?${buildQueryString(signed.query ?? {})}`;
  }

  destroy(): void {
    this.calls.destroy();
  }
}
