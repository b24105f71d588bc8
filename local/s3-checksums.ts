/**
 * Body checksums as S3 verifies them (D61), for the SigV4 verifier (s3-sigv4.ts) and the S3
 * emulator's verifying front (s3-front.ts): the checksums a request states
 * (`x-amz-checksum-<algorithm>` in a header or in the pre-signed query, or Content-MD5), handed back
 * in the verifier's verdict; checksumOf computes a body's checksum in any algorithm S3 knows (crc32,
 * crc32c, crc64nvme, sha1, sha256, sha512, md5, xxhash64, xxhash3, xxhash128) and null for one it
 * does not.
 */
import { createHash } from 'node:crypto';
import { crc32 } from 'node:zlib';
import { Crc32c, Crc64NvmeJs } from '@aws-sdk/checksums/crc';
import { Xxh3_128, Xxh3_64, Xxh64 } from '@aws-sdk/checksums/xxh';

/** A checksum the request states for its body (header or pre-signed query), as S3 verifies it. */
export interface StatedChecksum {
  /** `crc32`, `sha1`, `sha256`, `md5` (Content-MD5), or another algorithm S3 knows. */
  algorithm: string;
  base64: string;
}

/** `x-amz-checksum-<alg>` in the headers or the query (a pre-signed URL carries it there), and Content-MD5. */
export function statedChecksums(headers: Record<string, string>, query: Record<string, string | string[]>): StatedChecksum[] {
  const out: StatedChecksum[] = [];
  for (const [name, value] of [...Object.entries(headers), ...Object.entries(query).map(([k, v]) => [k.toLowerCase(), Array.isArray(v) ? v[0]! : v] as const)]) {
    const m = /^x-amz-checksum-([a-z0-9]+)$/.exec(name);
    if (m && m[1] !== 'type' && m[1] !== 'algorithm' && m[1] !== 'mode') out.push({ algorithm: m[1]!, base64: value });
  }
  if (headers['content-md5']) out.push({ algorithm: 'md5', base64: headers['content-md5'] });
  return out;
}

/** The SDK's own implementations of the checksums Node does not have, by S3's header suffix. */
const SDK_CHECKSUMS: Record<string, () => { update(b: Uint8Array): void; digest(): Promise<Uint8Array> }> = {
  crc32c: () => new Crc32c(),
  crc64nvme: () => new Crc64NvmeJs(),
  xxhash64: () => new Xxh64(),
  xxhash3: () => new Xxh3_64(),
  xxhash128: () => new Xxh3_128(),
};

/**
 * The body's checksum in `algorithm` (S3's header suffix), base64 as S3 states it; null for a name
 * S3 does not know (the request is then refused, never passed unchecked).
 */
export async function checksumOf(algorithm: string, body: Buffer): Promise<string | null> {
  switch (algorithm) {
    case 'crc32': {
      const b = Buffer.alloc(4);
      b.writeUInt32BE(crc32(body) >>> 0);
      return b.toString('base64');
    }
    case 'sha1':
    case 'sha256':
    case 'sha512':
    case 'md5':
      return createHash(algorithm).update(body).digest('base64');
    default: {
      const make = SDK_CHECKSUMS[algorithm];
      if (!make) return null;
      const h = make();
      h.update(body);
      return Buffer.from(await h.digest()).toString('base64');
    }
  }
}
