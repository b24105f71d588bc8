/**
 * The signature side of Signature Version 4 verification as S3 does it (D61), for the verifier in
 * s3-sigv4.ts: the signature S3 expects of a request, computed with `@smithy/signature-v4`, the
 * SDK's own signer (its canonical request, string to sign and signing key), and the constant-time
 * comparison with the signature the request carries.
 */
import { createHash, createHmac, timingSafeEqual } from 'node:crypto';
import { getCanonicalHeaders, SignatureV4 } from '@smithy/signature-v4';
import type { HttpRequest, SourceData } from '@smithy/types';

export const ALGORITHM = 'AWS4-HMAC-SHA256';

export interface Credentials {
  accessKeyId: string;
  secretAccessKey: string;
}

const toBuffer = (d: SourceData): Buffer =>
  typeof d === 'string' ? Buffer.from(d) : ArrayBuffer.isView(d) ? Buffer.from(d.buffer, d.byteOffset, d.byteLength) : Buffer.from(d);

/** SHA-256 / HMAC-SHA-256 in the shape the smithy signer expects. */
class NodeSha256 {
  private readonly hash;
  constructor(secret?: SourceData) {
    this.hash = secret === undefined ? createHash('sha256') : createHmac('sha256', toBuffer(secret));
  }
  update(data: SourceData): void {
    this.hash.update(toBuffer(data));
  }
  digest(): Promise<Uint8Array> {
    return Promise.resolve(new Uint8Array(this.hash.digest()));
  }
}

/** The smithy signer with its canonical-request steps opened for verification. */
export class Verifier extends SignatureV4 {
  constructor(credentials: Credentials, region: string) {
    // S3 signs the path as sent (no second encoding, no normalisation).
    super({ credentials, region, service: 's3', sha256: NodeSha256, uriEscapePath: false, applyChecksum: false });
  }

  async expectedSignature(request: HttpRequest, signedHeaders: string[], payloadHash: string, longDate: string, scope: string): Promise<string> {
    const canonicalHeaders = getCanonicalHeaders(request, undefined, new Set(signedHeaders));
    const canonicalRequest = this.createCanonicalRequest(request, canonicalHeaders, payloadHash);
    const stringToSign = await this.createStringToSign(longDate, scope, canonicalRequest, ALGORITHM);
    const [, region, service] = scope.split('/');
    return this.sign(stringToSign, { signingDate: parseAmzDate(longDate)!, signingRegion: region, signingService: service });
  }
}

/** `20261123T180000Z` → Date, or null. */
export function parseAmzDate(s: string | undefined): Date | null {
  const m = /^(\d{4})(\d{2})(\d{2})T(\d{2})(\d{2})(\d{2})Z$/.exec(s ?? '');
  if (!m) return null;
  const d = new Date(Date.UTC(+m[1]!, +m[2]! - 1, +m[3]!, +m[4]!, +m[5]!, +m[6]!));
  return Number.isNaN(d.getTime()) ? null : d;
}

export function sameHex(a: string, b: string): boolean {
  const x = Buffer.from(a);
  const y = Buffer.from(b);
  return x.length === y.length && timingSafeEqual(x, y);
}
