/**
 * Secrets at run time (D63): never from a Lambda environment variable, never in the template.
 *
 * Deployed: the function's manifest entry declares the secrets it reads (`access.secrets`, see
 * shared/manifest/access.ts); the stack grants `secretsmanager:GetSecretValue` on exactly those and
 * passes each ARN (an identifier, not the value) as `SECRET_ARN_<NAME>`. Values are read from the
 * AWS Parameters and Secrets Lambda Extension (a layer the stack adds to exactly these functions,
 * lib/constructs/key-access.ts `secretsExtension`), which Lambda's documentation recommends for reading
 * secrets: its HTTP endpoint on localhost answers like GetSecretValue and caches each secret for
 * `EXTENSION_TTL_SECONDS`; the function keeps a value `MAX_AGE_SECONDS` more, so a rotated secret
 * is picked up within five minutes without a redeploy. No Secrets Manager client is in the bundle
 * (it was a tenth of a list route's cold load, docs/benchmarks.md).
 *
 * Local: the runtime keeps its secrets in a file under its data folder (`LOCAL_SECRETS_FILE`,
 * a JSON object name → value, mode 0600), so they survive restarts like the data they protect.
 * Each invocation of the local runtime reads only the secrets its manifest entry declares, as the
 * deployed grant allows (`withGrantedSecrets`): a handler that reads another fails locally first.
 */
import { AsyncLocalStorage } from 'node:async_hooks';
import { readFileSync } from 'node:fs';
import { secretArnVariable, type SecretName } from '../manifest/access';

/** Seconds the extension keeps a secret before asking Secrets Manager again (its cache TTL). */
export const EXTENSION_TTL_SECONDS = 240;
/** Seconds the function reuses a value the extension gave it; with the TTL, at most 300 s stale. */
const MAX_AGE_SECONDS = 60;
/** The extension's port unless `PARAMETERS_SECRETS_EXTENSION_HTTP_PORT` says otherwise. */
const EXTENSION_PORT = 2773;
const EXTENSION_TIMEOUT_MS = 3000;

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

const grants = new AsyncLocalStorage<readonly SecretName[]>();

/**
 * Local runtime: runs one invocation of a function that is granted only `secrets` (its manifest
 * entry's, shared/manifest/access.ts `secretsRead`); getSecret refuses any other inside it, as the
 * deployed function has neither the permission nor the ARN. Outside any invocation (tests, scripts)
 * every secret of the file is readable.
 */
export function withGrantedSecrets<T>(secrets: readonly SecretName[], fn: () => T): T {
  return grants.run(secrets, fn);
}

/** The current value of a secret; throws SecretUnavailableError when it is not configured. */
export async function getSecret(name: SecretName): Promise<string> {
  if (process.env.RUNTIME === 'local') {
    const granted = grants.getStore();
    if (granted && !granted.includes(name)) {
      throw new SecretUnavailableError(`secret ${name}: not granted to this function (its manifest entry does not declare it)`);
    }
    return readLocalEntry(name);
  }
  const arn = process.env[secretArnVariable(name)];
  if (!arn) throw new SecretUnavailableError(`secret ${name}: ${secretArnVariable(name)} is not set (not granted to this function)`);
  const cached = deployedCache.get(arn);
  if (cached && cached.until > Date.now()) return cached.value;
  const reply = await fromExtension(arn).catch((e: Error) => {
    throw new SecretUnavailableError(`secret ${name}: the secrets extension did not answer (${e.message})`);
  });
  if (reply.status !== 200) throw new SecretUnavailableError(`secret ${name}: the secrets extension answered ${reply.status}: ${reply.body.slice(0, 200)}`);
  let value: unknown;
  try {
    value = (JSON.parse(reply.body) as { SecretString?: unknown }).SecretString;
  } catch {
    throw new SecretUnavailableError(`secret ${name}: the secrets extension's answer is not JSON`);
  }
  if (typeof value !== 'string' || !value) throw new SecretUnavailableError(`secret ${name} is empty or binary`);
  deployedCache.set(arn, { value, until: Date.now() + MAX_AGE_SECONDS * 1000 });
  return value;
}

const deployedCache = new Map<string, { value: string; until: number }>();

/**
 * GET /secretsmanager/get?secretId=… on the extension, authenticated by the function's session
 * token in `X-Aws-Parameters-Secrets-Token`; the body is GetSecretValue's JSON answer.
 */
function fromExtension(arn: string): Promise<{ status: number; body: string }> {
  const port = Number(process.env.PARAMETERS_SECRETS_EXTENSION_HTTP_PORT ?? EXTENSION_PORT);
  return new Promise((resolve, reject) => {
    // node:http taken as a CommonJS built-in: imported as an ES module, Node 22 builds its facade by
    // reading every export, and its lazy WebSocket getters load undici, 7–11 ms of every cold start
    // of a function that reads a secret (docs/benchmarks.md, the Node.js 22 section).
    const req = process.getBuiltinModule('node:http').get(
      {
        host: 'localhost',
        port,
        path: `/secretsmanager/get?secretId=${encodeURIComponent(arn)}`,
        headers: { 'X-Aws-Parameters-Secrets-Token': process.env.AWS_SESSION_TOKEN ?? '' },
        timeout: EXTENSION_TIMEOUT_MS,
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks).toString('utf8') }));
        res.on('error', reject);
      },
    );
    req.on('timeout', () => req.destroy(new Error(`no answer within ${EXTENSION_TIMEOUT_MS} ms`)));
    req.on('error', reject);
  });
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
  deployedCache.clear();
}
