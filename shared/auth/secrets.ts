/**
 * Secrets (D5, D9): `svc_live_sk_` / `svc_test_sk_` / `svc_wkr_` + 32 base62 characters. Only the
 * SHA-256 of a secret is stored; the secret is shown once.
 */
import { createHash, randomInt } from 'node:crypto';
import type { Env } from '../types';

const BASE62 = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz';

function base62(n: number): string {
  let s = '';
  for (let i = 0; i < n; i++) s += BASE62[randomInt(62)];
  return s;
}

export const keyPrefix = (env: Env) => `svc_${env}_sk_`;
export const WORKER_PREFIX = 'svc_wkr_';

export function newApiSecret(env: Env): string {
  return keyPrefix(env) + base62(32);
}

export function newWorkerToken(): string {
  return WORKER_PREFIX + base62(32);
}

export function sha256hex(s: string): string {
  return createHash('sha256').update(s).digest('hex');
}

/** D5: `svc_live_sk_...` + the last 4 characters. */
export function maskSecret(secret: string): string {
  const env: Env = secret.startsWith('svc_test_') ? 'test' : 'live';
  return `${keyPrefix(env)}...${secret.slice(-4)}`;
}

const API_KEY_RE = /^svc_(live|test)_sk_[0-9A-Za-z]{32}$/;
const WORKER_RE = /^svc_wkr_[0-9A-Za-z]{32}$/;

export type SecretShape = { kind: 'api_key'; env: Env } | { kind: 'worker' } | null;

export function secretShape(secret: string): SecretShape {
  const m = API_KEY_RE.exec(secret);
  if (m) return { kind: 'api_key', env: m[1] as Env };
  if (WORKER_RE.test(secret)) return { kind: 'worker' };
  return null;
}
