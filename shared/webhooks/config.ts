/**
 * Webhook settings from the environment, read once (see docs/webhooks.md, "Operating").
 *
 * Endpoint signing secrets are sealed with the KMS key (deployed) or the data folder's keyring
 * (local); no key material is read from the environment (see shared/secrets/sealer.ts).
 * - `WEBHOOK_RETRY_SCALE` (local only, default 1): multiplies the D37 retry delays so tests run in
 *   seconds. The deployed stack never sets it and it is ignored unless RUNTIME=local.
 * - `WEBHOOK_ALLOW_LOOPBACK` (local only, default true, D44): plain-http loopback receivers
 *   (`http://127.0.0.1`, `http://localhost`, `http://[::1]`) for development.
 */
import { config } from '../config';

export interface WebhookConfig {
  retryScale: number;
  allowLoopback: boolean;
}

let cached: WebhookConfig | null = null;
/** The shared config object this was derived from: a resetConfig() (local runtime start) re-reads. */
let derivedFrom: object | null = null;

export function webhookConfig(): WebhookConfig {
  const c = config();
  if (cached && derivedFrom === c) return cached;
  derivedFrom = c;
  const e = process.env;
  const local = c.runtime === 'local';
  const scale = local && e.WEBHOOK_RETRY_SCALE !== undefined ? Number(e.WEBHOOK_RETRY_SCALE) : 1;
  cached = {
    retryScale: Number.isFinite(scale) && scale >= 0 ? scale : 1,
    allowLoopback: local && (e.WEBHOOK_ALLOW_LOOPBACK ?? 'true') !== 'false',
  };
  return cached;
}

/** Tests change the environment, then call this (with resetConfig from shared/config). */
export function resetWebhookConfig(): void {
  cached = null;
}
