/** Sealed values as they were made before each sealing purpose had an encryption context of its own. */
import { createCipheriv, randomBytes } from 'node:crypto';
import { LEGACY_ENCRYPTION_CONTEXT } from '../../shared/secrets/kms';
import type { KeyProvider } from '../../shared/secrets/sealer';

/** `plain` sealed the old way: `s2`, the data key under the one context all purposes shared. */
export async function sealedTheOldWay(keys: KeyProvider, plain: string, aad: string): Promise<string> {
  const dk = await keys.generateDataKey(LEGACY_ENCRYPTION_CONTEXT);
  const iv = randomBytes(12);
  const c = createCipheriv('aes-256-gcm', dk.plaintext, iv);
  c.setAAD(Buffer.from(aad, 'utf8'));
  const ct = Buffer.concat([c.update(plain, 'utf8'), c.final()]);
  return ['s2', Buffer.from(dk.keyId), dk.encrypted, iv, c.getAuthTag(), ct].map((p) => p.toString('base64url')).join('.');
}
