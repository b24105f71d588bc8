/**
 * Run-time access to secrets and keys that a function declares in its manifest entry (D63).
 *
 * The stack grants exactly what is declared here and nothing more (per-function grants), and
 * passes only identifiers in the environment, never a secret value:
 * - `secrets`: `secretsmanager:GetSecretValue` on each named secret, its ARN in
 *   `SECRET_ARN_<NAME>` (upper case, `-` → `_`, e.g. `SECRET_ARN_CDN_SIGNING_KEY`). The handler
 *   reads the value at run time through `shared/secrets` (the AWS Parameters and Secrets Lambda Extension, cached).
 * - `kms`: the sealing key (envelope encryption), per purpose: webhook endpoint secrets
 *   (`endpoint-secret`) and responses kept in idempotency records that hold a one-time secret
 *   (`stored-response`), each under an encryption context of its own; its ARN in `KMS_KEY_ID`.
 * - `cdnSign`: signs CDN download URLs; implies the `cdn-signing-key` secret and sets
 *   `CDN_BASE_URL` and `CDN_KEY_PAIR_ID` (public identifiers).
 * - `transcribe`: starts Amazon Transcribe jobs on the media bucket (D65).
 * - `uploadSigner`: hands out pre-signed upload URLs (D24) signed with the credentials of the
 *   stack's upload-signing role, assumed for each plan (`sts:AssumeRole`, one hour): a pre-signed
 *   URL lives only as long as the credentials that signed it, and the function's own role
 *   credentials may expire sooner than the hour the URL promises. Its ARN in
 *   `UPLOAD_SIGNER_ROLE_ARN`; the role may only put objects under `uploads/`.
 * The local runtime ignores the grants and serves the same names from its data folder.
 */

import { BUCKET_PREFIXES } from './wiring';
import type { SealingPurpose } from '../secrets/kms';

/** Secrets Manager secrets of the stack. `stripe` holds `{"secret_key","webhook_secret"}` as JSON. */
export const SECRET_NAMES = ['cursor', 'cdn-signing-key', 'stripe'] as const;
export type SecretName = (typeof SECRET_NAMES)[number];

/**
 * Access to the media bucket (lib/constructs/grants.ts `bindBucket`; local/bucket-grants.ts says
 * action by action what each allows, and the local runtime enforces it):
 * `read` get and list; `write` put and tag upload objects (and tag keyframes) only; `delete` delete objects only;
 * `tag` tag upload objects and keyframes only; and one mode per pipeline consumer that needs more than one of
 * these, each limited to the prefixes it works on: `score` get, tag and delete upload objects, get
 * transcripts (and list, so a missing one is a 404, not a 403); `annotate` get and tag upload objects and put keyframes;
 * `export` put (multipart) and abort under `exports/` only.
 */
export type BucketAccess = 'transcripts' | 'write' | 'delete' | 'tag' | 'score' | 'annotate' | 'export';

/** The IAM actions our S3 calls need (one per operation; multipart parts need s3:PutObject). */
export type BucketAction =
  | 's3:GetObject'
  | 's3:GetObjectTagging'
  | 's3:ListBucket'
  | 's3:PutObject'
  | 's3:PutObjectTagging'
  | 's3:DeleteObject'
  | 's3:AbortMultipartUpload';

/** The keyframes of a rejected video are tagged for the lifecycle rule as its bytes are (and back on an override approval). */
const KEYFRAME_TAGS: { actions: BucketAction[]; prefix: string } = { actions: ['s3:PutObjectTagging'], prefix: BUCKET_PREFIXES.keyframes };

/**
 * Per mode: the object actions, each set limited to a key prefix (null: any key of the bucket), and
 * whether the bucket may be listed (s3:ListBucket: a bucket action, granted on the bucket or not at
 * all; with it a missing object answers 404 rather than 403).
 */
export const BUCKET_GRANTS: Record<BucketAccess, { objects: { actions: BucketAction[]; prefix: string | null }[]; list: boolean }> = {
  // Transcribe's output documents (D65), read and looked for (list: a missing one answers 404).
  transcripts: { objects: [{ actions: ['s3:GetObject'], prefix: BUCKET_PREFIXES.transcripts }], list: true },
  // Uploads: the bytes, and the verdict tag of a rejection decided in the request (the fan-in can
  // complete there) or of the bytes of a direct upload that failed half-way.
  // list: tagging a key that holds no object (bytes that never landed) must answer 404, not 403.
  // A verdict (or an override approval, `tag`) also tags the keyframes of the round's videos.
  write: { objects: [{ actions: ['s3:PutObject', 's3:PutObjectTagging'], prefix: BUCKET_PREFIXES.uploads }, KEYFRAME_TAGS], list: true },
  // The objects of Files an override withdrew: their bytes and their keyframes.
  delete: { objects: [{ actions: ['s3:DeleteObject'], prefix: BUCKET_PREFIXES.uploads }, { actions: ['s3:DeleteObject'], prefix: BUCKET_PREFIXES.keyframes }], list: false },
  tag: { objects: [{ actions: ['s3:PutObjectTagging'], prefix: BUCKET_PREFIXES.uploads }, KEYFRAME_TAGS], list: true },
  score: {
    objects: [
      { actions: ['s3:GetObject', 's3:PutObjectTagging', 's3:DeleteObject'], prefix: BUCKET_PREFIXES.uploads },
      // A transcript whose state-change event never came is read from Transcribe's output (D65).
      { actions: ['s3:GetObject'], prefix: BUCKET_PREFIXES.transcripts },
      KEYFRAME_TAGS,
    ],
    list: true,
  },
  annotate: {
    objects: [
      // Either stage may take the verdict (the one that writes last): a rejection tags the bytes.
      { actions: ['s3:GetObject', 's3:PutObjectTagging'], prefix: BUCKET_PREFIXES.uploads },
      { actions: ['s3:PutObject', 's3:PutObjectTagging'], prefix: BUCKET_PREFIXES.keyframes },
    ],
    list: false,
  },
  export: { objects: [{ actions: ['s3:PutObject', 's3:AbortMultipartUpload'], prefix: BUCKET_PREFIXES.exports }], list: false },
};

/**
 * What every authenticated request writes, even on a read-only route (shared/ratelimit,
 * shared/auth/authenticate): UpdateItem, and only on items whose partition key is a secret's
 * lookup item (the request count), a rate-limit window (a key in its rotation overlap, a worker or a
 * signup source) or an organization's partition (an API key's `last_used_at`, once a minute).
 * The stack grants it with a `dynamodb:LeadingKeys` condition; the local runtime enforces the same.
 */
export const REQUEST_COUNT_PARTITIONS = ['SECRET#*', 'RL#*', 'ORG#*'] as const;

/**
 * What a read route that takes an Idempotency-Key writes besides its request count
 * (shared/idempotency.ts): its idempotency records only (PutItem for the lock, UpdateItem for the
 * stored answer, DeleteItem to give the key back), by partition key (`dynamodb:LeadingKeys`). The
 * stack grants it to those routes (`files.refresh_url`); the local runtime enforces it.
 */
export const IDEMPOTENCY_PARTITIONS = ['IDEM#*'] as const;
export const IDEMPOTENCY_ACTIONS = ['dynamodb:PutItem', 'dynamodb:UpdateItem', 'dynamodb:DeleteItem'] as const;

/** The most held long polls a wait-slot item counts (context `longPollMaxWaits` and `longPollMaxWaitsPerOrg` are at most this). */
export const WAIT_SLOTS_MAX = 100;

/**
 * What a long-poll route writes besides its request count (shared/long-poll-slots.ts): UpdateItem
 * on the wait-slot items only (`dynamodb:LeadingKeys`), naming only their keys and slots
 * (`dynamodb:Attributes`). The stack grants it to the long-poll routes; the local runtime enforces it.
 */
export const WAIT_SLOT_PARTITIONS = ['LPW#*'] as const;
export const WAIT_SLOT_ATTRIBUTES: readonly string[] = ['PK', 'SK', ...Array.from({ length: WAIT_SLOTS_MAX }, (_, i) => `w${i}`)];

/** Minutes in the hour a request count keeps a counter for (shared/ratelimit `Windows.minuteIndex`). */
const MINUTES = Array.from({ length: 60 }, (_, i) => i);

/**
 * Every attribute those writes name (`dynamodb:Attributes`, granted with `ForAllValues:StringEquals`):
 * the table's keys, a secret item's counters (shared/ratelimit `SECRET_COUNTER`), a rate-limit
 * window's counters and TTL, and an API key's `last_used_at`. So a read route's role cannot write
 * anything else on those items: not a secret's scopes or principal, not an organization's balance
 * or tier. A write naming another attribute is refused (AccessDenied), deployed and locally
 * (local/table-grants.ts). Reads are not narrowed: the same roles may already read the whole table.
 */
export const REQUEST_COUNT_ATTRIBUTES: readonly string[] = [
  'PK',
  'SK',
  'rl_hour',
  'rl_n',
  ...MINUTES.map((i) => `rl_m${i}`),
  'n',
  ...MINUTES.map((i) => `m${i}`),
  'ttl',
  'last_used_at',
];

/**
 * Use of the sealing key, by purpose (shared/secrets/kms.ts): `encrypt` seals (kms:GenerateDataKey),
 * `decrypt` opens (kms:Decrypt), each only with that purpose's encryption context.
 */
export type KmsAccess = Partial<Record<SealingPurpose, 'encrypt' | 'decrypt' | 'encrypt-decrypt'>>;

/** Whether `kms` lets a function seal (`encrypt`) or open (`decrypt`) values of `purpose`. */
export function kmsAllows(kms: KmsAccess | undefined, purpose: SealingPurpose, use: 'encrypt' | 'decrypt'): boolean {
  const a = kms?.[purpose];
  return a === use || a === 'encrypt-decrypt';
}

export interface KeyAccess {
  secrets?: SecretName[];
  kms?: KmsAccess;
  cdnSign?: boolean;
  transcribe?: boolean;
  uploadSigner?: boolean;
}

/** The secrets a manifest entry reads (`secrets`, and the CDN signing key with `cdnSign`): its grant. */
export function secretsRead(access: KeyAccess): SecretName[] {
  const names = new Set<SecretName>(access.secrets ?? []);
  if (access.cdnSign) names.add('cdn-signing-key');
  return [...names];
}

/** `SECRET_ARN_<NAME>`: the environment variable that carries a secret's ARN (never its value). */
export function secretArnVariable(name: SecretName): string {
  return `SECRET_ARN_${name.toUpperCase().replace(/-/g, '_')}`;
}
