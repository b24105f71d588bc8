/**
 * The KMS key provider of the sealer (deployed, D63): one GenerateDataKey per data key and one
 * Decrypt per unwrapped data key (the sealer caches both for minutes). The key id KMS answers
 * with (the key's ARN) is stored beside each value and passed back to Decrypt, so values sealed
 * under an earlier key, or an earlier version of a rotated key, stay readable.
 */
import { DecryptCommand, GenerateDataKeyCommand, KMSClient, type KMSClientConfig } from '@aws-sdk/client-kms';
import type { KeyProvider } from './sealer';
import { traced } from '../observability/tracer';

/** Bound into every data key; a ciphertext made for another purpose does not decrypt here. */
export const ENCRYPTION_CONTEXT = { purpose: 'sealed-secret', service: 'media-marketplace' } as const;

export function kmsKeyProvider(opts: { keyId: string; client?: KMSClient; clientConfig?: KMSClientConfig }): KeyProvider {
  const client = opts.client ?? traced(new KMSClient(opts.clientConfig ?? {}));
  return {
    name: 'kms',
    async generateDataKey() {
      const out = await client.send(new GenerateDataKeyCommand({ KeyId: opts.keyId, KeySpec: 'AES_256', EncryptionContext: { ...ENCRYPTION_CONTEXT } }));
      if (!out.Plaintext || !out.CiphertextBlob || !out.KeyId) throw new Error('KMS GenerateDataKey returned no key');
      return { keyId: out.KeyId, plaintext: Buffer.from(out.Plaintext), encrypted: Buffer.from(out.CiphertextBlob) };
    },
    async decryptDataKey(keyId, encrypted) {
      const out = await client.send(new DecryptCommand({ KeyId: keyId, CiphertextBlob: encrypted, EncryptionContext: { ...ENCRYPTION_CONTEXT } }));
      if (!out.Plaintext) throw new Error('KMS Decrypt returned no plaintext');
      return Buffer.from(out.Plaintext);
    },
  };
}
