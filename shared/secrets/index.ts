/**
 * Secrets at run time (D63): never from a Lambda environment variable, never in the template.
 *
 * Deployed: the function's manifest entry declares the secrets it reads (`access.secrets`, see
 * shared/manifest/access.ts); the stack grants `secretsmanager:GetSecretValue` on exactly those and
 * passes each ARN (an identifier, not the value) as `SECRET_ARN_<NAME>`. Values are fetched with
 * Powertools Parameters and cached for `maxAge` seconds, so a rotated secret is picked up within
 * that time without a redeploy.
 *
 * Local: the runtime keeps its secrets in a file under its data folder (`LOCAL_SECRETS_FILE`,
 * a JSON object name → value, mode 0600), so they survive restarts like the data they protect.
 */
import { readFileSync } from 'node:fs';
import { secretArnVariable, type SecretName } from '../manifest/access';

/** Seconds a fetched value is reused before Secrets Manager is asked again. */
const MAX_AGE_SECONDS = 300;

export class SecretUnavailableError extends Error {
  override name = 'SecretUnavailableError';
}

let localCache: { file: string; values: Record<string, string> } | null = null;

/** An entry of the local secrets file (local runtime only), e.g. the sealing keyring. */
export function readLocalEntry(name: string): string {
  const file = process.env.LOCAL_SECRETS_FILE;
  if (!file) throw new SecretUnavailableError(`secret ${name}: LOCAL_SECRETS_FILE is not set`);
  if (localCache?.file !== file) localCache = { file, values: JSON.parse(readFileSync(file, 'utf8')) as Record<string, string> };
  const value = localCache.values[name];
  if (typeof value !== 'string' || !value) throw new SecretUnavailableError(`secret ${name} is not in ${file}`);
  return value;
}

/** The current value of a secret; throws SecretUnavailableError when it is not configured. */
export async function getSecret(name: SecretName): Promise<string> {
  if (process.env.RUNTIME === 'local') return readLocalEntry(name);
  const arn = process.env[secretArnVariable(name)];
  if (!arn) throw new SecretUnavailableError(`secret ${name}: ${secretArnVariable(name)} is not set (not granted to this function)`);
  const { getSecret: fetchSecret } = await import('@aws-lambda-powertools/parameters/secrets');
  const value = await fetchSecret(arn, { maxAge: MAX_AGE_SECONDS });
  if (typeof value !== 'string' || !value) throw new SecretUnavailableError(`secret ${name} is empty or binary`);
  return value;
}

/** Whether this function was given a secret (deployed) or the local file holds it. */
export function hasSecret(name: SecretName): boolean {
  if (process.env.RUNTIME === 'local') {
    try {
      readLocalEntry(name);
      return true;
    } catch {
      return false;
    }
  }
  return Boolean(process.env[secretArnVariable(name)]);
}

/** Tests and the local runtime call this after rewriting the secrets file. */
export function resetSecrets(): void {
  localCache = null;
}
