/**
 * Webhook settings from the environment, read once (see docs/webhooks.md, "Operating").
 *
 * - `WEBHOOK_SECRET_KEY`: 32-byte AES-256-GCM key (64 hex chars or base64) that encrypts endpoint
 *   signing secrets at rest. Required in the deployed stack (a Secrets Manager value resolved into
 *   the function environment, like CURSOR_SECRET). The local runtime derives one from its persisted
 *   CURSOR_SECRET when unset, so secrets survive a restart of `npm start`.
 * - `WEBHOOK_RETRY_SCALE` (local only, default 1): multiplies the D37 retry delays so tests run in
 *   seconds. The deployed stack never sets it and it is ignored unless RUNTIME=local.
 * - `WEBHOOK_ALLOW_LOOPBACK` (local only, default true, D44): plain-http loopback receivers
 *   (`http://127.0.0.1`, `http://localhost`, `http://[::1]`) for development.
 */
import { createHash, hkdfSync } from 'node:crypto';
import { config } from '../config';

export interface WebhookConfig {
  retryScale: number;
  allowLoopback: boolean;
  /** AES-256 key and its short id (stored with each ciphertext, for a future key rotation). */
  secretKey: Buffer | null;
  secretKeyId: string | null;
}

let cached: WebhookConfig | null = null;
/** The shared config object this was derived from: a resetConfig() (local runtime start) re-reads. */
let derivedFrom: object | null = null;

/**
 * 64 hex characters or base64 of 32 bytes are the key itself; any other value of at least 32
 * characters (e.g. a Secrets Manager generated password) is hashed (SHA-256) into the key.
 */
function parseKey(raw: string): Buffer {
  const s = raw.trim();
  if (/^[0-9a-fA-F]{64}$/.test(s)) return Buffer.from(s, 'hex');
  const b64 = /^[A-Za-z0-9+/]{43}=$/.test(s) ? Buffer.from(s, 'base64') : null;
  if (b64 && b64.length === 32) return b64;
  if (s.length >= 32) return createHash('sha256').update(s).digest();
  throw new Error('WEBHOOK_SECRET_KEY must be 32 bytes (64 hex characters or base64) or a random string of at least 32 characters');
}

export function webhookConfig(): WebhookConfig {
  const c = config();
  if (cached && derivedFrom === c) return cached;
  derivedFrom = c;
  const e = process.env;
  const local = c.runtime === 'local';
  let key: Buffer | null = null;
  if (e.WEBHOOK_SECRET_KEY) key = parseKey(e.WEBHOOK_SECRET_KEY);
  else if (local) key = Buffer.from(hkdfSync('sha256', c.cursorSecret, 'webhook-secret-key', 'local-runtime', 32));
  const scale = local && e.WEBHOOK_RETRY_SCALE !== undefined ? Number(e.WEBHOOK_RETRY_SCALE) : 1;
  cached = {
    retryScale: Number.isFinite(scale) && scale >= 0 ? scale : 1,
    allowLoopback: local && (e.WEBHOOK_ALLOW_LOOPBACK ?? 'true') !== 'false',
    secretKey: key,
    secretKeyId: key ? createHash('sha256').update(key).digest('hex').slice(0, 8) : null,
  };
  return cached;
}

/** Tests change the environment, then call this (with resetConfig from shared/config). */
export function resetWebhookConfig(): void {
  cached = null;
}
