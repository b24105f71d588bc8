/**
 * The KMS key provider of the sealer (deployed, D63): one GenerateDataKey per data key and one
 * Decrypt per unwrapped data key (the sealer caches both for minutes). The key id KMS answers
 * with (the key's ARN) is stored beside each value and passed back to Decrypt, so values sealed
 * under an earlier key, or an earlier version of a rotated key, stay readable.
 *
 * The two calls go out in KMS's published JSON 1.1 protocol through shared/aws/json-rpc.ts, not
 * the KMS SDK client: the routes that seal or open a secret (API keys, webhook endpoints, sign-up)
 * parsed that client at every cold start for these two operations (docs/benchmarks.md).
 */
import type { AwsCredentialIdentityProvider } from '@smithy/types';
import { JsonRpcClient } from '../aws/json-rpc';
import type { KeyProvider } from './sealer';

/**
 * What a sealed value is for. Each purpose has an encryption context of its own, bound into every
 * data key sealed for it, and each role may use the key only with the contexts of the purposes its
 * manifest entry names (lib/constructs/key-access.ts): the webhook dispatcher, which opens
 * endpoint secrets, cannot unwrap a stored response's data key, and a route that replays stored
 * responses cannot unwrap an endpoint secret's.
 */
export const SEALING_PURPOSES = ['endpoint-secret', 'stored-response'] as const;
export type SealingPurpose = (typeof SEALING_PURPOSES)[number];

export type EncryptionContext = Readonly<Record<'purpose' | 'service', string>>;

/** The encryption context of one purpose. */
export function encryptionContext(purpose: SealingPurpose): EncryptionContext {
  return { purpose, service: 'media-marketplace' };
}

/**
 * The one context every value was sealed with before the purposes had their own (sealed form `s2`):
 * such values still open, with this context, until they are gone (sealer.ts).
 */
export const LEGACY_ENCRYPTION_CONTEXT: EncryptionContext = { purpose: 'sealed-secret', service: 'media-marketplace' };

/** A client of KMS (`TrentService`), at the region's endpoint unless another is given. */
export function kmsClient(opts: { region?: string; endpoint?: string; credentials?: AwsCredentialIdentityProvider } = {}): JsonRpcClient {
  return new JsonRpcClient({ service: 'kms', targetPrefix: 'TrentService', version: '1.1', clientName: 'KMSClient', ...opts });
}

const bytes = (b64: string | undefined) => (b64 === undefined ? undefined : Buffer.from(b64, 'base64'));

export function kmsKeyProvider(opts: { keyId: string; client?: JsonRpcClient }): KeyProvider {
  const client = opts.client ?? kmsClient();
  return {
    name: 'kms',
    async generateDataKey(context) {
      const out = await client.call<{ KeyId?: string; Plaintext?: string; CiphertextBlob?: string }>('GenerateDataKey', {
        KeyId: opts.keyId,
        KeySpec: 'AES_256',
        EncryptionContext: { ...context },
      });
      const plaintext = bytes(out.Plaintext);
      const encrypted = bytes(out.CiphertextBlob);
      if (!plaintext || !encrypted || !out.KeyId) throw new Error('KMS GenerateDataKey returned no key');
      return { keyId: out.KeyId, plaintext, encrypted };
    },
    async decryptDataKey(keyId, encrypted, context) {
      const out = await client.call<{ Plaintext?: string }>('Decrypt', { KeyId: keyId, CiphertextBlob: encrypted, EncryptionContext: { ...context } });
      const plaintext = bytes(out.Plaintext);
      if (!plaintext) throw new Error('KMS Decrypt returned no plaintext');
      return plaintext;
    },
  };
}
