/**
 * The settings the local runtime takes as a default deployment has them: an environment variable
 * when set, else the context value of cdk.json (what `cdk deploy` reads), else the stack's default.
 */
import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { WAF_RATE_DEFAULTS } from '../shared/http/edge';

/**
 * A setting as a default deployment has it: the environment variable `env` when set, else the
 * context value `key` of cdk.json (what `cdk deploy` reads), else the stack's default.
 */
function deployedSetting(env: string, key: string, stackDefault: number): number {
  const fromEnv = process.env[env];
  if (fromEnv) return Number(fromEnv);
  const v = cdkContext(key);
  return v === undefined ? stackDefault : Number(v);
}

/** The context value `key` of cdk.json (what `cdk deploy` reads); undefined when unset or unreadable. */
function cdkContext(key: string): unknown {
  try {
    return ((JSON.parse(readFileSync(resolve(__dirname, '..', 'cdk.json'), 'utf8')) as { context?: Record<string, unknown> }).context ?? {})[key];
  } catch {
    return undefined;
  }
}

/** The long-poll budget (lib/stack.ts: context `longPollSeconds`, default 25); `LOCAL_LONG_POLL_SECONDS`. */
export const deployedLongPollSeconds = () => deployedSetting('LOCAL_LONG_POLL_SECONDS', 'longPollSeconds', 25);
/** Held long polls per long-poll route (lib/settings.ts `longPollMaxWaits`, default 20); `LOCAL_LONG_POLL_MAX_WAITS`. */
export const deployedLongPollMaxWaits = () => deployedSetting('LOCAL_LONG_POLL_MAX_WAITS', 'longPollMaxWaits', 20);
/** Held long polls per long-poll route and organization (`longPollMaxWaitsPerOrg`, default 5); `LOCAL_LONG_POLL_MAX_WAITS_PER_ORG`. */
export const deployedLongPollMaxWaitsPerOrg = () => deployedSetting('LOCAL_LONG_POLL_MAX_WAITS_PER_ORG', 'longPollMaxWaitsPerOrg', 5);
/** A rate-based rule's limit as WAF takes it (an integer 10..2,000,000,000, as lib/settings.ts checks the context): else a clear error at start. */
function wafLimit(env: string, key: string, stackDefault: number): number {
  const n = deployedSetting(env, key, stackDefault);
  if (!Number.isInteger(n) || n < 10 || n > 2_000_000_000) {
    throw new Error(`${env} (or cdk.json's ${key}) must be an integer from 10 to 2000000000, as WAF takes a rate limit; got ${process.env[env] ?? n}`);
  }
  return n;
}

/** The web ACL's per-IP rate on every route (`wafRatePer5Min`, default 6000); `LOCAL_WAF_RATE_PER_5MIN`. */
export const deployedWafRatePer5Min = () => wafLimit('LOCAL_WAF_RATE_PER_5MIN', 'wafRatePer5Min', WAF_RATE_DEFAULTS.perIpPer5Min);
/** The web ACL's per-IP rate on the signup routes (`wafSignupRatePer5Min`, default 20); `LOCAL_WAF_SIGNUP_RATE_PER_5MIN`. */
export const deployedWafSignupRatePer5Min = () => wafLimit('LOCAL_WAF_SIGNUP_RATE_PER_5MIN', 'wafSignupRatePer5Min', WAF_RATE_DEFAULTS.signupPerIpPer5Min);

/**
 * Whether values sealed under the encryption context all sealing purposes shared before still open
 * (lib/stack.ts: context `legacySealedValues`, default true); `LOCAL_LEGACY_SEALED_VALUES`. Else
 * than true or false is a clear error, as the stack's context check gives.
 */
export function deployedLegacySealedValues(): boolean {
  const env = 'LOCAL_LEGACY_SEALED_VALUES';
  const v: unknown = process.env[env] || cdkContext('legacySealedValues');
  if (v === undefined || v === null || v === '' || v === true || v === 'true') return true;
  if (v === false || v === 'false') return false;
  throw new Error(`${env} (or cdk.json's legacySealedValues) must be true or false; got ${String(v)}`);
}
