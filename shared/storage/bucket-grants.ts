/**
 * What a function may do on the media bucket, by its manifest entry's `bucket` mode, as the stack
 * grants it (lib/constructs/grants.ts `bindBucket`; test/cdk/bucket-grants.test.ts checks that the
 * synthesized policies allow exactly what `allows` says, action by action and prefix by prefix).
 *
 * The local runtime runs every handler with one set of emulator credentials, so S3 itself cannot
 * refuse a call the deployed role would not be allowed to make. Instead each invocation runs inside
 * `withBucketGrant(mode)` (local/lambda.ts `grantedTo`) and the S3 client of the local runtime
 * refuses, before sending, any operation the mode does not allow: AccessDenied locally first, as
 * deployed. Outside an invocation (tests, scripts, the runtime itself) nothing is checked.
 */
import { AsyncLocalStorage } from 'node:async_hooks';
import { BUCKET_PREFIXES } from '../manifest/wiring';
import type { BucketAccess } from '../manifest/access';

/** The IAM actions our S3 calls need (one per operation; multipart parts need s3:PutObject). */
export type BucketAction =
  | 's3:GetObject'
  | 's3:GetObjectTagging'
  | 's3:ListBucket'
  | 's3:PutObject'
  | 's3:PutObjectTagging'
  | 's3:DeleteObject'
  | 's3:AbortMultipartUpload';

const READ: BucketAction[] = ['s3:GetObject', 's3:GetObjectTagging', 's3:ListBucket'];
const ANYWHERE = null;

/** Per mode: the actions, and the key prefix they are limited to (null: any key of the bucket). */
const GRANTS: Record<BucketAccess, { actions: BucketAction[]; prefix: string | null }> = {
  read: { actions: READ, prefix: ANYWHERE },
  // Uploads: the bytes, and the verdict tag of a rejection decided in the request (the fan-in can
  // complete there) or of the bytes of a direct upload that failed half-way.
  write: { actions: ['s3:PutObject', 's3:PutObjectTagging'], prefix: BUCKET_PREFIXES.uploads },
  'read-write': { actions: [...READ, 's3:PutObject', 's3:PutObjectTagging', 's3:DeleteObject', 's3:AbortMultipartUpload'], prefix: ANYWHERE },
  delete: { actions: ['s3:DeleteObject'], prefix: ANYWHERE },
  tag: { actions: ['s3:PutObjectTagging'], prefix: BUCKET_PREFIXES.uploads },
};

/** True when a function with bucket access `mode` (undefined: none) may do `action` on `key` (null: the bucket). */
export function allows(mode: BucketAccess | undefined, action: BucketAction, key: string | null): boolean {
  if (!mode) return false;
  const g = GRANTS[mode];
  if (!g.actions.includes(action)) return false;
  if (action === 's3:ListBucket') return g.prefix === null; // a bucket action: granted on the bucket or not at all
  return key !== null && (g.prefix === null || key.startsWith(g.prefix));
}

/** The action each S3 command needs, and the keys it touches. */
const COMMANDS: Record<string, { action: BucketAction; keys: (input: S3Input) => (string | null)[] }> = {
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

interface S3Input {
  Key?: string;
  Delete?: { Objects?: { Key?: string }[] };
}

/** Thrown locally where the deployed role would get 403 AccessDenied. */
export class BucketAccessDenied extends Error {
  readonly $metadata = { httpStatusCode: 403 };
  constructor(message: string) {
    super(message);
    this.name = 'AccessDenied';
  }
}

const grants = new AsyncLocalStorage<{ mode: BucketAccess | undefined; fn: string }>();

/** Local runtime: runs one invocation of function `fn`, granted bucket access `mode` (undefined: none). */
export function withBucketGrant<T>(mode: BucketAccess | undefined, fn: string, run: () => T): T {
  return grants.run({ mode, fn }, run);
}

/** Refuses `commandName` on `input` when the current invocation's grant does not allow it. */
export function checkBucketCall(commandName: string, input: unknown): void {
  const grant = grants.getStore();
  if (!grant) return;
  const c = COMMANDS[commandName];
  if (!c) throw new BucketAccessDenied(`${grant.fn}: ${commandName} is not an operation any function of the stack is granted`);
  for (const key of c.keys((input ?? {}) as S3Input)) {
    if (!allows(grant.mode, c.action, key)) {
      throw new BucketAccessDenied(`${grant.fn} is not authorized to perform ${c.action} on ${key ?? 'the bucket'} (bucket access: ${grant.mode ?? 'none'})`);
    }
  }
}
