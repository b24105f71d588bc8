import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createHttpServer } from '../../local/http';
import { grantedTo } from '../../local/lambda';
import { silentLog } from '../../local/log';
import { getSecret, resetSecrets } from '../../shared/secrets';
import type { SecretName } from '../../shared/manifest/access';

// Deployed, a function can read only the secrets its manifest entry declares (the stack grants
// exactly those, and sets only their ARNs). The local runtime holds every handler to the same grant,
// so a handler that reads another secret fails locally first instead of in production.
describe('local runtime: a function reads only the secrets its manifest entry declares', () => {
  let dir: string;
  const saved = { RUNTIME: process.env.RUNTIME, LOCAL_SECRETS_FILE: process.env.LOCAL_SECRETS_FILE };
  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), 'secret-grants-'));
    writeFileSync(join(dir, 'secrets.json'), JSON.stringify({ cursor: 'cursor-key', stripe: '{"secret_key":"sk_test_x"}' }));
    process.env.RUNTIME = 'local';
    process.env.LOCAL_SECRETS_FILE = join(dir, 'secrets.json');
    resetSecrets();
  });
  afterAll(() => {
    for (const [k, v] of Object.entries(saved)) {
      if (v === undefined) delete process.env[k];
      else process.env[k] = v;
    }
    resetSecrets();
    rmSync(dir, { recursive: true, force: true });
  });

  const reading = (name: SecretName) => async () => ({ value: await getSecret(name) });

  it('an invocation reads a secret its entry declares', async () => {
    await expect(grantedTo('fn', { secrets: ['cursor'] }, reading('cursor'))({}, {} as never)).resolves.toEqual({ value: 'cursor-key' });
    await expect(grantedTo('fn', { cdnSign: true, secrets: ['stripe'] }, reading('stripe'))({}, {} as never)).resolves.toEqual({ value: '{"secret_key":"sk_test_x"}' });
  });

  it('an invocation that reads a secret its entry does not declare fails, even in a later async step', async () => {
    const later = async () => {
      await new Promise((r) => setTimeout(r, 10));
      return getSecret('stripe');
    };
    await expect(grantedTo('fn', { secrets: ['cursor'] }, later)({}, {} as never)).rejects.toThrow(/secret stripe: not granted to this function/);
    await expect(grantedTo('fn', {}, reading('cursor'))({}, {} as never)).rejects.toThrow(/not granted/);
  });

  it('through the HTTP front, a route whose handler reads an undeclared secret answers 502, as its deployed function would fail', async () => {
    const server = createHttpServer({ log: silentLog, loadHandler: async () => async () => ({ statusCode: 200, body: await getSecret('stripe') }) });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
    try {
      // GET /v1/me declares no secret.
      const res = await fetch(`http://127.0.0.1:${(server.address() as AddressInfo).port}/v1/me`);
      expect(res.status).toBe(502);
      expect(await res.text()).not.toContain('sk_test_x');
    } finally {
      await new Promise<void>((r) => {
        server.close(() => r());
        server.closeAllConnections();
      });
    }
  });

  it('outside any invocation (tests, scripts) every secret of the file is readable', async () => {
    await expect(getSecret('stripe')).resolves.toContain('sk_test_x');
  });
});
