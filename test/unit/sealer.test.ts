/** Sealed secrets (D63, issue 11.1): envelope encryption, key rotation, the KMS adapter on the wire. */
import { GenerateDataKeyCommand, KMSClient } from '@aws-sdk/client-kms';
import { envelopeSealer, parseSealed, resetSealer, sealer } from '../../shared/secrets/sealer';
import { localKeyProvider } from '../../shared/secrets/local-keyring';
import { encryptionContext, kmsClient, kmsKeyProvider, LEGACY_ENCRYPTION_CONTEXT } from '../../shared/secrets/kms';
import type { JsonRpcClient } from '../../shared/aws/json-rpc';
import { resetSecrets } from '../../shared/secrets';
import { ensureLocalSecrets, rotateLocalSealingKey } from '../../local/secrets';
import { createCipheriv, createHash, hkdfSync, randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { newWebhookSecret, openEndpointSecret } from '../../shared/webhooks/secrets';
import { startFakeKms, type FakeKms } from '../support/kms-wire';
import { sealedTheOldWay } from '../support/legacy-sealing';

describe('local sealer (the data folder keyring)', () => {
  let file: string;
  beforeAll(() => {
    process.env.RUNTIME = 'local';
    file = ensureLocalSecrets(null).file;
    process.env.LOCAL_SECRETS_FILE = file;
    resetSecrets();
    resetSealer();
  });

  test('a sealed secret round-trips and does not contain the secret', async () => {
    const s = newWebhookSecret();
    const sealed = await sealer('endpoint-secret').seal(s, 'we_A');
    expect(sealed).not.toContain(s);
    expect(sealed).not.toContain(s.slice(6, 30));
    expect(await sealer('endpoint-secret').open(sealed, 'we_A')).toBe(s);
  });

  test('D63: a value sealed for one purpose does not open as another\'s (its data key is bound to the purpose)', async () => {
    const sealed = await sealer('endpoint-secret').seal('whsec_x', 'we_A');
    expect(sealed.startsWith('s3.')).toBe(true);
    await expect(sealer('stored-response').open(sealed, 'we_A')).rejects.toThrow();
    expect(await sealer('endpoint-secret').open(sealed, 'we_A')).toBe('whsec_x');
  });

  test('a value sealed before the purposes had their own context (s2) still opens', async () => {
    const old = await sealedTheOldWay(localKeyProvider(), 'whsec_old', 'we_A');
    expect(await sealer('endpoint-secret').open(old, 'we_A')).toBe('whsec_old');
  });

  test('a sealed value is bound to its owner: moved to another, it does not open', async () => {
    const sealed = await sealer('endpoint-secret').seal('secret', 'we_A');
    await expect(sealer('endpoint-secret').open(sealed, 'we_B')).rejects.toThrow();
  });

  test('rotating the keyring keeps every older value readable and seals new values with the new key', async () => {
    const before = await sealer('endpoint-secret').seal('old secret', 'we_A');
    const newKey = rotateLocalSealingKey(file);
    resetSecrets();
    resetSealer();
    const after = await sealer('endpoint-secret').seal('new secret', 'we_A');
    expect(parseSealed(after).keyId).toBe(`local/${newKey}`);
    expect(parseSealed(before).keyId).not.toBe(`local/${newKey}`);
    expect(await sealer('endpoint-secret').open(before, 'we_A')).toBe('old secret');
    expect(await sealer('endpoint-secret').open(after, 'we_A')).toBe('new secret');
  });

  test('the secrets file is never rewritten in place: left as it is when nothing changed, replaced whole (a new file renamed over it) when something did', () => {
    const dir = mkdtempSync(join(tmpdir(), 'secrets-durable-'));
    try {
      const path = ensureLocalSecrets(dir).file;
      const inode = statSync(path).ino;
      ensureLocalSecrets(dir);
      expect(statSync(path).ino).toBe(inode); // a start with nothing to add does not touch it
      rotateLocalSealingKey(path);
      expect(statSync(path).ino).not.toBe(inode); // a change is a new file renamed over the old one
      expect(statSync(path).mode & 0o777).toBe(0o600);
      expect(() => JSON.parse(readFileSync(path, 'utf8'))).not.toThrow();
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  test('a value sealed under a key missing from the keyring does not open', async () => {
    const sealed = await sealer('endpoint-secret').seal('x', 'a');
    process.env.LOCAL_SECRETS_FILE = ensureLocalSecrets(null).file; // another data folder
    resetSecrets();
    resetSealer();
    await expect(sealer('endpoint-secret').open(sealed, 'a')).rejects.toThrow(/not in the local keyring/);
    process.env.LOCAL_SECRETS_FILE = file;
    resetSecrets();
    resetSealer();
  });

  test('an endpoint secret sealed by the first round (v1, key derived from the cursor key) still opens after the upgrade', async () => {
    const cursorKey = 'legacy-cursor-key';
    process.env.LOCAL_SECRETS_FILE = ensureLocalSecrets(null, { cursor: cursorKey }).file;
    resetSecrets();
    resetSealer();
    // The first round's AES-256-GCM box, as it sealed: v1:<key id>:<iv>:<tag>:<ciphertext>, AAD = endpoint id.
    const key = Buffer.from(hkdfSync('sha256', cursorKey, 'webhook-secret-key', 'local-runtime', 32));
    const iv = randomBytes(12);
    const c = createCipheriv('aes-256-gcm', key, iv);
    c.setAAD(Buffer.from('we_legacy'));
    const ct = Buffer.concat([c.update('whsec_legacy', 'utf8'), c.final()]);
    const kid = createHash('sha256').update(key).digest('hex').slice(0, 8);
    const v1 = ['v1', kid, iv.toString('base64'), c.getAuthTag().toString('base64'), ct.toString('base64')].join(':');
    expect(await openEndpointSecret(v1, 'we_legacy')).toBe('whsec_legacy');
    await expect(openEndpointSecret(v1, 'we_other')).rejects.toThrow();
    process.env.LOCAL_SECRETS_FILE = file;
    resetSecrets();
    resetSealer();
  });

  test('deployed without KMS_KEY_ID the sealer refuses instead of storing anything in the clear', () => {
    process.env.RUNTIME = 'aws';
    delete process.env.KMS_KEY_ID;
    resetSealer();
    expect(() => sealer('endpoint-secret')).toThrow(/KMS_KEY_ID/);
    process.env.RUNTIME = 'local';
    resetSealer();
  });
});

describe('KMS sealer against the KMS wire protocol', () => {
  let kms: FakeKms;
  let client: JsonRpcClient;
  const credentials = { accessKeyId: 'AKIDTEST', secretAccessKey: 'test' };
  beforeAll(async () => {
    kms = await startFakeKms();
    client = kmsClient({ endpoint: kms.endpoint, region: 'us-east-1', credentials: async () => credentials });
  });
  afterAll(async () => {
    client.destroy();
    await kms.close();
  });

  test("sealing asks GenerateDataKey for an AES_256 key of the configured key with its purpose's encryption context", async () => {
    const arn = kms.createKey();
    const s = envelopeSealer(kmsKeyProvider({ keyId: arn, client }), 'endpoint-secret');
    kms.requests.length = 0;
    const sealed = await s.seal('whsec_abc', 'we_1');
    expect(kms.requests).toEqual([
      { target: 'TrentService.GenerateDataKey', body: { KeyId: arn, KeySpec: 'AES_256', EncryptionContext: encryptionContext('endpoint-secret') } },
    ]);
    expect(parseSealed(sealed).keyId).toBe(arn);
    expect(sealed).not.toContain('whsec_abc');
  });

  test('opening asks Decrypt with the stored key id and the encrypted data key, once per data key', async () => {
    const arn = kms.createKey();
    const sealed = await envelopeSealer(kmsKeyProvider({ keyId: arn, client }), 'endpoint-secret').seal('whsec_abc', 'we_1');
    const reader = envelopeSealer(kmsKeyProvider({ keyId: arn, client }), 'endpoint-secret');
    kms.requests.length = 0;
    expect(await reader.open(sealed, 'we_1')).toBe('whsec_abc');
    expect(await reader.open(sealed, 'we_1')).toBe('whsec_abc');
    expect(kms.requests).toHaveLength(1);
    expect(kms.requests[0]).toEqual({
      target: 'TrentService.Decrypt',
      body: { KeyId: arn, CiphertextBlob: parseSealed(sealed).encrypted.toString('base64'), EncryptionContext: encryptionContext('endpoint-secret') },
    });
  });

  test('after an automatic rotation of the KMS key, values sealed before still open', async () => {
    const arn = kms.createKey();
    const old = await envelopeSealer(kmsKeyProvider({ keyId: arn, client }), 'endpoint-secret').seal('before rotation', 'we_1');
    kms.rotate(arn);
    const s = envelopeSealer(kmsKeyProvider({ keyId: arn, client }), 'endpoint-secret');
    const fresh = await s.seal('after rotation', 'we_1');
    expect(await s.open(old, 'we_1')).toBe('before rotation');
    expect(await s.open(fresh, 'we_1')).toBe('after rotation');
  });

  test('after the stack moves to another key, values sealed under the old key still open (the key id travels with them)', async () => {
    const oldArn = kms.createKey();
    const old = await envelopeSealer(kmsKeyProvider({ keyId: oldArn, client }), 'endpoint-secret').seal('under the old key', 'we_1');
    const s = envelopeSealer(kmsKeyProvider({ keyId: kms.createKey(), client }), 'endpoint-secret');
    expect(await s.open(old, 'we_1')).toBe('under the old key');
  });

  test('D63: each purpose asks for its own data keys with its own context, and one purpose\'s value does not open as another\'s', async () => {
    const arn = kms.createKey();
    const responses = envelopeSealer(kmsKeyProvider({ keyId: arn, client }), 'stored-response');
    const secrets = envelopeSealer(kmsKeyProvider({ keyId: arn, client }), 'endpoint-secret');
    kms.requests.length = 0;
    const response = await responses.seal('{"secret":"sk_x"}', 'idem_1');
    expect(kms.requests).toEqual([{ target: 'TrentService.GenerateDataKey', body: { KeyId: arn, KeySpec: 'AES_256', EncryptionContext: encryptionContext('stored-response') } }]);
    await expect(secrets.open(response, 'idem_1')).rejects.toMatchObject({ name: 'InvalidCiphertextException' });
    expect(await responses.open(response, 'idem_1')).toBe('{"secret":"sk_x"}');
  });

  test('a value sealed under the one shared context before (s2) opens with a Decrypt that names that context', async () => {
    const arn = kms.createKey();
    const old = await sealedTheOldWay(kmsKeyProvider({ keyId: arn, client }), 'whsec_old', 'we_1');
    const s = envelopeSealer(kmsKeyProvider({ keyId: arn, client }), 'endpoint-secret');
    kms.requests.length = 0;
    expect(await s.open(old, 'we_1')).toBe('whsec_old');
    expect(kms.requests.map((r) => [r.target, (r.body as { EncryptionContext: object }).EncryptionContext])).toEqual([['TrentService.Decrypt', LEGACY_ENCRYPTION_CONTEXT]]);
  });

  test('data keys are reused for a few minutes, so a burst of seals costs one KMS call', async () => {
    const s = envelopeSealer(kmsKeyProvider({ keyId: kms.createKey(), client }), 'endpoint-secret');
    kms.requests.length = 0;
    await s.seal('a', '1');
    await s.seal('b', '2');
    (await s.prepare()).seal('c', '3');
    expect(kms.requests.filter((r) => r.target === 'TrentService.GenerateDataKey')).toHaveLength(1);
  });

  test('a KMS error is named and described as the SDK client names it (an unknown key: NotFoundException)', async () => {
    const sdk = new KMSClient({ endpoint: kms.endpoint, region: 'us-east-1', credentials });
    const theirs = (await sdk.send(new GenerateDataKeyCommand({ KeyId: 'arn:aws:kms:us-east-1:000000000000:key/none', KeySpec: 'AES_256' })).catch((e: unknown) => e)) as Error;
    sdk.destroy();
    const mine = (await kmsKeyProvider({ keyId: 'arn:aws:kms:us-east-1:000000000000:key/none', client })
      .generateDataKey(encryptionContext('endpoint-secret'))
      .catch((e: unknown) => e)) as Error;
    expect({ name: mine.name, message: mine.message }).toEqual({ name: theirs.name, message: theirs.message });
    expect(mine.name).toBe('NotFoundException');
  });
});
