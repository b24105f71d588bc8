/**
 * Endpoint signing secrets (D36): `whsec_` + base64 of 32 random bytes, shown once (create and
 * rotate_secret). Unlike API keys they must be recoverable to sign each delivery, so they are
 * stored encrypted at rest with AES-256-GCM (see docs/webhooks.md, "Secrets at rest").
 *
 * `SecretBox` is the interface; the one implementation takes its key from `WEBHOOK_SECRET_KEY`
 * (deployed: a Secrets Manager value; local: persisted by the runtime or derived from its persisted
 * cursor secret). A KMS-backed box would implement the same two functions around a data key.
 */
import { createCipheriv, createDecipheriv, randomBytes } from 'node:crypto';
import { webhookConfig } from './config';

export const SECRET_PREFIX = 'whsec_';

export function newWebhookSecret(): string {
  return SECRET_PREFIX + randomBytes(32).toString('base64');
}

export interface SecretBox {
  /** `aad` binds the ciphertext to its owner (the endpoint id): a blob moved to another item fails. */
  seal(plain: string, aad: string): string;
  open(sealed: string, aad: string): string;
}

const VERSION = 'v1';

export function aesGcmBox(key: Buffer, keyId: string): SecretBox {
  if (key.length !== 32) throw new Error('AES-256-GCM needs a 32-byte key');
  return {
    seal(plain, aad) {
      const iv = randomBytes(12);
      const c = createCipheriv('aes-256-gcm', key, iv);
      c.setAAD(Buffer.from(aad));
      const ct = Buffer.concat([c.update(plain, 'utf8'), c.final()]);
      return [VERSION, keyId, iv.toString('base64'), c.getAuthTag().toString('base64'), ct.toString('base64')].join(':');
    },
    open(sealed, aad) {
      const [v, kid, iv, tag, ct] = sealed.split(':');
      if (v !== VERSION || !iv || !tag || !ct) throw new Error('unrecognised sealed secret');
      if (kid !== keyId) throw new Error(`sealed with key ${kid}, not the configured key ${keyId}`);
      const d = createDecipheriv('aes-256-gcm', key, Buffer.from(iv, 'base64'));
      d.setAAD(Buffer.from(aad));
      d.setAuthTag(Buffer.from(tag, 'base64'));
      return Buffer.concat([d.update(Buffer.from(ct, 'base64')), d.final()]).toString('utf8');
    },
  };
}

/** The configured box; throws when no key is configured (the deployed stack must set one). */
export function secretBox(): SecretBox {
  const c = webhookConfig();
  if (!c.secretKey || !c.secretKeyId) throw new Error('WEBHOOK_SECRET_KEY is not set');
  return aesGcmBox(c.secretKey, c.secretKeyId);
}
