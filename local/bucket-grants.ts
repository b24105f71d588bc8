/**
 * The local grant check on the media bucket (grants.ts): each S3 command's action and keys, against
 * the bucket access of the function's manifest entry (shared/manifest/access.ts `BUCKET_GRANTS`).
 */
import { BUCKET_PREFIXES } from '../shared/manifest/wiring';
import { BUCKET_GRANTS, type BucketAccess, type BucketAction } from '../shared/manifest/access';
import { AccessDenied, type Grants } from './grants-model';

export type { BucketAction };

/**
 * True when a function with bucket access `mode` (undefined: none) may do `action` on `key` (null:
 * the bucket). With `transcribe`, also what Amazon Transcribe does with the caller's permissions
 * (lib/constructs/service-grants.ts `grantTranscribe`): read uploads, write under transcripts/.
 */
export function allows(mode: BucketAccess | undefined, action: BucketAction, key: string | null, opts: { transcribe?: boolean } = {}): boolean {
  if (opts.transcribe && key !== null) {
    if (action === 's3:GetObject' && key.startsWith(BUCKET_PREFIXES.uploads)) return true;
    if (action === 's3:PutObject' && key.startsWith(BUCKET_PREFIXES.transcripts)) return true;
  }
  if (!mode) return false;
  const g = BUCKET_GRANTS[mode];
  if (action === 's3:ListBucket') return g.list && key === null;
  return key !== null && g.objects.some((o) => o.actions.includes(action) && (o.prefix === null || key.startsWith(o.prefix)));
}

interface S3Input {
  Key?: string;
  Delete?: { Objects?: { Key?: string }[] };
}

/** The action each S3 command needs, and the keys it touches. */
const S3_COMMANDS: Record<string, { action: BucketAction; keys: (input: S3Input) => (string | null)[] }> = {
  GetObjectCommand: { action: 's3:GetObject', keys: (i) => [i.Key ?? null] },
  HeadObjectCommand: { action: 's3:GetObject', keys: (i) => [i.Key ?? null] },
  GetObjectTaggingCommand: { action: 's3:GetObjectTagging', keys: (i) => [i.Key ?? null] },
  ListObjectsV2Command: { action: 's3:ListBucket', keys: () => [null] },
  PutObjectCommand: { action: 's3:PutObject', keys: (i) => [i.Key ?? null] },
  CreateMultipartUploadCommand: { action: 's3:PutObject', keys: (i) => [i.Key ?? null] },
  UploadPartCommand: { action: 's3:PutObject', keys: (i) => [i.Key ?? null] },
  CompleteMultipartUploadCommand: { action: 's3:PutObject', keys: (i) => [i.Key ?? null] },
  AbortMultipartUploadCommand: { action: 's3:AbortMultipartUpload', keys: (i) => [i.Key ?? null] },
  PutObjectTaggingCommand: { action: 's3:PutObjectTagging', keys: (i) => [i.Key ?? null] },
  DeleteObjectCommand: { action: 's3:DeleteObject', keys: (i) => [i.Key ?? null] },
  DeleteObjectsCommand: { action: 's3:DeleteObject', keys: (i) => (i.Delete?.Objects ?? []).map((o) => o.Key ?? null) },
};

export function checkBucket(g: Grants, command: string, input: S3Input): void {
  const c = S3_COMMANDS[command];
  if (!c) throw new AccessDenied(`${g.fn}: ${command} is not an S3 operation any function of the stack is granted`);
  for (const key of c.keys(input)) {
    if (!allows(g.bucket, c.action, key, { transcribe: g.transcribe })) {
      throw new AccessDenied(`${g.fn} is not authorized to perform ${c.action} on ${key ?? 'the bucket'} (bucket access: ${g.bucket ?? 'none'})`);
    }
  }
}
