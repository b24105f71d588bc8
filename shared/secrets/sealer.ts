/**
 * Sealed secrets (D63, issue 11.1): envelope encryption of secrets that must be recoverable (webhook
 * endpoint signing secrets) or that a stored response holds (one-time secrets in idempotency
 * records). Each value is encrypted with AES-256-GCM under a data key; the data key is stored
 * beside the ciphertext, encrypted by a key-encryption key that never leaves its keeper:
 *
 * - `kms` (deployed, `KMS_KEY_ID`): GenerateDataKey / Decrypt on the stack's KMS key. KMS keeps
 *   every earlier version of a rotated key, and the key id stored with each value names the key
 *   that wrapped it, so old values stay readable after a rotation or a change of key.
 * - `local` (the embedded runtime): a keyring in the data folder's secrets file; rotating it adds
 *   a key and makes it current, and the older keys stay for opening older values.
 *
 * Each purpose (kms.ts: endpoint secrets, stored responses) has a sealer of its own, `sealer(purpose)`,
 * whose data keys are bound to the purpose's encryption context: a role granted the key for one
 * purpose cannot unwrap another's data keys, and a value sealed for one purpose does not open as
 * another's.
 *
 * Sealed form: `s3.<key id>.<encrypted data key>.<iv>.<tag>.<ciphertext>` (base64url parts), the
 * data key under the purpose's context. The `aad` binds a value to its owner (an endpoint id, an
 * idempotency record): moved elsewhere, it does not open. Values sealed before the purposes had
 * contexts of their own (`s2.…`, one shared context) still open, with that context; new values are
 * never sealed so. Stored responses expire in 24 h; endpoint secrets are re-sealed once
 * (scripts/reseal-endpoint-secrets.ts).
 */
// Imported statically: in a single-file bundle an import() wraps every module it reaches (the SDK
// core shared with the DynamoDB client too) and keeps the client's whole package, which cost more
// at a cold start than loading the KMS client itself. Only the functions granted the key reach
// this module's KMS path (test/cdk/request-bundles.test.ts).
import { encryptionContext, kmsKeyProvider, LEGACY_ENCRYPTION_CONTEXT, type EncryptionContext, type SealingPurpose } from './kms';
import { createCipheriv, createDecipheriv, randomBytes } from 'node:crypto';
import { localKeyProvider, openLegacyV1 } from './local-keyring';
import { getSecret } from './index';
import { checkCall } from '../observability/invocation';

/** The keeper of the key-encryption key. */
export interface KeyProvider {
  readonly name: 'kms' | 'local';
  /** A fresh 32-byte data key bound to `context`, in plaintext and wrapped, and the id of the key that wrapped it. */
  generateDataKey(context: EncryptionContext): Promise<{ keyId: string; plaintext: Buffer; encrypted: Buffer }>;
  /** Unwrap a data key wrapped by `keyId` under `context` (another context does not open it). */
  decryptDataKey(keyId: string, encrypted: Buffer, context: EncryptionContext): Promise<Buffer>;
}

/** A data key taken ahead of time: seals synchronously (e.g. while a transaction is being built). */
export interface PreparedSeal {
  seal(plain: string, aad: string): string;
}

export interface Sealer {
  readonly provider: string;
  readonly purpose: SealingPurpose;
  seal(plain: string, aad: string): Promise<string>;
  open(sealed: string, aad: string): Promise<string>;
  prepare(): Promise<PreparedSeal>;
}

const PREFIX = 's3';
/** The sealed form of values sealed under the one shared context (see above): opened, never made. */
const LEGACY_PREFIX = 's2';
const b64 = (b: Buffer) => b.toString('base64url');
const unb64 = (s: string) => Buffer.from(s, 'base64url');

export function isSealed(v: unknown): v is string {
  return typeof v === 'string' && (v.startsWith(`${PREFIX}.`) || v.startsWith(`${LEGACY_PREFIX}.`));
}

function sealWith(dk: { keyId: string; plaintext: Buffer; encrypted: Buffer }, plain: string, aad: string): string {
  const iv = randomBytes(12);
  const c = createCipheriv('aes-256-gcm', dk.plaintext, iv);
  c.setAAD(Buffer.from(aad, 'utf8'));
  const ct = Buffer.concat([c.update(plain, 'utf8'), c.final()]);
  return [PREFIX, b64(Buffer.from(dk.keyId, 'utf8')), b64(dk.encrypted), b64(iv), b64(c.getAuthTag()), b64(ct)].join('.');
}

export function parseSealed(sealed: string): { legacy: boolean; keyId: string; encrypted: Buffer; iv: Buffer; tag: Buffer; ct: Buffer } {
  const parts = sealed.split('.');
  if (parts.length !== 6 || (parts[0] !== PREFIX && parts[0] !== LEGACY_PREFIX)) throw new Error('not a sealed value');
  const [v, kid, edk, iv, tag, ct] = parts as [string, string, string, string, string, string];
  return { legacy: v === LEGACY_PREFIX, keyId: unb64(kid).toString('utf8'), encrypted: unb64(edk), iv: unb64(iv), tag: unb64(tag), ct: unb64(ct) };
}

/** The encryption context a sealed value's data key was wrapped under. */
export function contextOfSealed(sealed: string, purpose: SealingPurpose): EncryptionContext {
  return sealed.startsWith(`${LEGACY_PREFIX}.`) ? LEGACY_ENCRYPTION_CONTEXT : encryptionContext(purpose);
}

export function aesGcmOpen(key: Buffer, iv: Buffer, tag: Buffer, ct: Buffer, aad: string): string {
  const d = createDecipheriv('aes-256-gcm', key, iv);
  d.setAAD(Buffer.from(aad, 'utf8'));
  d.setAuthTag(tag);
  return Buffer.concat([d.update(ct), d.final()]).toString('utf8');
}

/** How long an unwrapped data key is kept in memory (fewer KMS calls on the delivery path). */
const CACHE_MS = 5 * 60_000;

export function envelopeSealer(keys: KeyProvider, purpose: SealingPurpose, opts: { reuseDataKeyMs?: number } = {}): Sealer {
  const reuseMs = opts.reuseDataKeyMs ?? CACHE_MS;
  const context = encryptionContext(purpose);
  let current: { dk: { keyId: string; plaintext: Buffer; encrypted: Buffer }; until: number } | null = null;
  const unwrapped = new Map<string, { key: Buffer; until: number }>();

  async function dataKey() {
    const t = Date.now();
    if (current && current.until > t) return current.dk;
    const dk = await keys.generateDataKey(context);
    current = reuseMs > 0 ? { dk, until: t + reuseMs } : null;
    return dk;
  }

  return {
    provider: keys.name,
    purpose,
    async seal(plain, aad) {
      return sealWith(await dataKey(), plain, aad);
    },
    async prepare() {
      const dk = await dataKey();
      return { seal: (plain, aad) => sealWith(dk, plain, aad) };
    },
    async open(sealed, aad) {
      const p = parseSealed(sealed);
      const cacheKey = `${p.legacy}\n${p.keyId}\n${b64(p.encrypted)}`;
      const t = Date.now();
      let key = unwrapped.get(cacheKey);
      if (!key || key.until <= t) {
        key = { key: await keys.decryptDataKey(p.keyId, p.encrypted, contextOfSealed(sealed, purpose)), until: t + CACHE_MS };
        if (unwrapped.size > 1000) unwrapped.clear();
        unwrapped.set(cacheKey, key);
      }
      return aesGcmOpen(key.key, p.iv, p.tag, p.ct, aad);
    },
  };
}

let cached: { id: string; sealers: Map<SealingPurpose, Sealer> } | null = null;

/**
 * The sealer of `purpose` in this process: KMS when the function was given the key (`KMS_KEY_ID`),
 * the data folder's keyring in the local runtime. Deployed without `KMS_KEY_ID` it refuses, so a
 * function that was not granted the key fails loudly instead of storing anything in the clear.
 */
export function sealer(purpose: SealingPurpose): Sealer {
  const local = process.env.RUNTIME === 'local';
  const id = local ? `local:${process.env.LOCAL_SECRETS_FILE ?? ''}` : `kms:${process.env.KMS_KEY_ID ?? ''}`;
  if (cached?.id !== id) cached = { id, sealers: new Map() };
  let s = cached.sealers.get(purpose);
  if (s) return s;
  if (local) {
    // Locally the keyring is a file read: no data key is reused, so a rotation applies at once.
    // The keyring stands in for the KMS key, so each use is held to the function's grant as its
    // KMS call would be, with its encryption context (local/grants.ts; before the data-key cache,
    // as deployed a function without the grant has none).
    const inner = envelopeSealer(localKeyProvider(), purpose, { reuseDataKeyMs: 0 });
    const asKms = (command: 'GenerateDataKeyCommand' | 'DecryptCommand', context: EncryptionContext) => checkCall('KMSClient', command, { EncryptionContext: { ...context } });
    s = {
      ...inner,
      seal: async (plain, aad) => (asKms('GenerateDataKeyCommand', encryptionContext(purpose)), inner.seal(plain, aad)),
      prepare: async () => (asKms('GenerateDataKeyCommand', encryptionContext(purpose)), inner.prepare()),
      open: async (sealed, aad) => {
        if (sealed.startsWith('v1:')) return openLegacyV1(sealed, aad, await getSecret('cursor'));
        asKms('DecryptCommand', contextOfSealed(sealed, purpose));
        return inner.open(sealed, aad);
      },
    };
  } else if (process.env.KMS_KEY_ID) s = envelopeSealer(kmsKeyProvider({ keyId: process.env.KMS_KEY_ID }), purpose);
  else throw new Error('KMS_KEY_ID is not set: this function was not granted the sealing key (access.kms in its manifest entry)');
  cached.sealers.set(purpose, s);
  return s;
}

/** The sealer of responses stored for replays that hold a one-time secret (routes' `{ sealer }`). */
export const responseSealer = (): Sealer => sealer('stored-response');

/** Tests and the local runtime call this after changing the environment or the keyring. */
export function resetSealer(): void {
  cached = null;
}
