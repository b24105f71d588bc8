/**
 * The local runtime's key-encryption keys (D63): a keyring kept in the data folder's secrets file
 * under `sealing-keyring`, a JSON string `{"current":"<id>","keys":{"<id>":"<base64 of 32 bytes>"}}`.
 * It plays the part KMS plays deployed: data keys are wrapped with the current key, and the id of
 * the wrapping key is stored with each value, so after a rotation (a new current key; the old
 * ones stay) every older value still opens.
 */
import { createCipheriv, createDecipheriv, createHash, hkdfSync, randomBytes } from 'node:crypto';
import { readLocalEntry } from './index';
import type { KeyProvider } from './sealer';
import { LEGACY_ENCRYPTION_CONTEXT, type EncryptionContext } from './kms';

/**
 * A data key is wrapped with the purpose's encryption context as its additional data, as KMS binds
 * the context into its ciphertext: unwrapped with another context, it does not open. Data keys of
 * the legacy context (sealed form `s2`) were wrapped without one.
 */
const wrapAad = (context: EncryptionContext): Buffer | null =>
  context.purpose === LEGACY_ENCRYPTION_CONTEXT.purpose ? null : Buffer.from(`${context.service}/${context.purpose}`, 'utf8');

export const KEYRING_ENTRY = 'sealing-keyring';

export interface Keyring {
  current: string;
  keys: Record<string, string>;
}

export function parseKeyring(raw: string): Keyring {
  const k = JSON.parse(raw) as Keyring;
  if (!k || typeof k.current !== 'string' || !k.keys || typeof k.keys[k.current] !== 'string') throw new Error('malformed sealing keyring');
  return k;
}

const newKeyId = () => `lk_${randomBytes(6).toString('hex')}`;

/** A keyring with one fresh key (first start), or `ring` with a new current key (rotation). */
export function rotateKeyring(ring: Keyring | null): Keyring {
  const id = newKeyId();
  return { current: id, keys: { ...(ring?.keys ?? {}), [id]: randomBytes(32).toString('base64') } };
}

function keyOf(ring: Keyring, id: string): Buffer {
  const k = ring.keys[id];
  if (!k) throw new Error(`sealing key ${id} is not in the local keyring`);
  return Buffer.from(k, 'base64');
}

export function localKeyProvider(): KeyProvider {
  const ring = () => parseKeyring(readLocalEntry(KEYRING_ENTRY));
  return {
    name: 'local',
    async generateDataKey(context) {
      const r = ring();
      const plaintext = randomBytes(32);
      const iv = randomBytes(12);
      const c = createCipheriv('aes-256-gcm', keyOf(r, r.current), iv);
      const aad = wrapAad(context);
      if (aad) c.setAAD(aad);
      const ct = Buffer.concat([c.update(plaintext), c.final()]);
      return { keyId: `local/${r.current}`, plaintext, encrypted: Buffer.concat([iv, c.getAuthTag(), ct]) };
    },
    async decryptDataKey(keyId, encrypted, context) {
      const id = keyId.replace(/^local\//, '');
      const d = createDecipheriv('aes-256-gcm', keyOf(ring(), id), encrypted.subarray(0, 12));
      const aad = wrapAad(context);
      if (aad) d.setAAD(aad);
      d.setAuthTag(encrypted.subarray(12, 28));
      return Buffer.concat([d.update(encrypted.subarray(28)), d.final()]);
    },
  };
}

/**
 * Endpoint secrets sealed by the first round's local runtime (`v1:<kid>:<iv>:<tag>:<ct>`, a key
 * derived from the cursor key), so an existing data folder keeps delivering after the upgrade.
 */
export function openLegacyV1(sealed: string, aad: string, cursorKey: string): string {
  const [v, kid, iv, tag, ct] = sealed.split(':');
  if (v !== 'v1' || !iv || !tag || !ct) throw new Error('not a v1 sealed value');
  const key = Buffer.from(hkdfSync('sha256', cursorKey, 'webhook-secret-key', 'local-runtime', 32));
  if (createHash('sha256').update(key).digest('hex').slice(0, 8) !== kid) throw new Error(`v1 value sealed with unknown key ${kid}`);
  const d = createDecipheriv('aes-256-gcm', key, Buffer.from(iv, 'base64'));
  d.setAAD(Buffer.from(aad));
  d.setAuthTag(Buffer.from(tag, 'base64'));
  return Buffer.concat([d.update(Buffer.from(ct, 'base64')), d.final()]).toString('utf8');
}
