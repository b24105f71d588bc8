/**
 * The local runtime's secrets (D63): one JSON file under the data folder (`secrets.json`, mode
 * 0600), read by handlers through `shared/secrets` (`LOCAL_SECRETS_FILE`). Missing entries are
 * generated on start and kept, so cursors, sealed secrets and signed download URLs stay valid
 * across restarts. In-memory runs (tests) get a file in a temp directory.
 *
 * Entries: `cursor` (HMAC key of list cursors), `cdn-signing-key` (RSA private key PEM that signs
 * download URLs), `cdn-key-pair-id` (its public identifier, like a CloudFront key id) and
 * `sealing-keyring` (the keys that wrap sealed secrets, standing in for KMS; see
 * shared/secrets/local-keyring.ts). `stripe` is never generated: set it by hand (JSON
 * `{"secret_key","webhook_secret"}`) to try the Stripe provider locally.
 */
import { createHash, generateKeyPairSync, randomBytes } from 'node:crypto';
import { existsSync, mkdtempSync, readFileSync } from 'node:fs';
import { writeFileDurably } from './durable-write';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { KEYRING_ENTRY, parseKeyring, rotateKeyring } from '../shared/secrets/local-keyring';

export interface LocalSecrets {
  file: string;
  values: Record<string, string>;
}

function generate(name: string, values: Record<string, string>): string | undefined {
  switch (name) {
    case 'cursor':
      return randomBytes(32).toString('hex');
    case 'cdn-signing-key': {
      const { privateKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
      return privateKey.export({ type: 'pkcs8', format: 'pem' }).toString();
    }
    case 'cdn-key-pair-id': {
      const pem = values['cdn-signing-key'];
      if (!pem) return undefined;
      // A stable id derived from the key, shaped like CloudFront's (upper-case alphanumerics).
      return 'K' + createHash('sha256').update(pem).digest('hex').slice(0, 13).toUpperCase();
    }
    case KEYRING_ENTRY:
      return JSON.stringify(rotateKeyring(null));
    default:
      return undefined;
  }
}

/**
 * Opens (or creates) the secrets file and fills in what is missing. `overrides` win (tests pin a
 * cursor key); a pre-existing `cursor-secret` file of an older data folder is adopted.
 */
export function ensureLocalSecrets(dataDir: string | null, overrides: Record<string, string> = {}): LocalSecrets {
  const dir = dataDir ?? mkdtempSync(join(tmpdir(), 'local-secrets-'));
  const file = join(dir, 'secrets.json');
  const values: Record<string, string> = existsSync(file) ? (JSON.parse(readFileSync(file, 'utf8')) as Record<string, string>) : {};
  const legacy = join(dir, 'cursor-secret');
  if (!values.cursor && existsSync(legacy)) values.cursor = readFileSync(legacy, 'utf8').trim();
  for (const name of ['cursor', 'cdn-signing-key', 'cdn-key-pair-id', KEYRING_ENTRY]) {
    if (!values[name]) {
      const v = generate(name, values);
      if (v) values[name] = v;
    }
  }
  Object.assign(values, overrides);
  // Written only when something changed, and durably (a kill mid-write leaves the old file whole:
  // a lost sealing key would make every sealed secret unreadable).
  const text = JSON.stringify(values, null, 2);
  if (!existsSync(file) || readFileSync(file, 'utf8') !== text) writeFileDurably(file, text, 0o600);
  return { file, values };
}

/**
 * Rotate the local sealing key: a new key becomes current, the older ones stay so every value
 * sealed before still opens. Takes effect when the runtime (re)reads the file (restart).
 */
export function rotateLocalSealingKey(file: string): string {
  const values = JSON.parse(readFileSync(file, 'utf8')) as Record<string, string>;
  const ring = rotateKeyring(values[KEYRING_ENTRY] ? parseKeyring(values[KEYRING_ENTRY]) : null);
  values[KEYRING_ENTRY] = JSON.stringify(ring);
  writeFileDurably(file, JSON.stringify(values, null, 2), 0o600);
  return ring.current;
}
