import { createPublicKey, createVerify, generateKeyPairSync } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { cannedPolicy, DOWNLOAD_URL_TTL_SECONDS, signDownloadUrl } from '../../shared/cdn';
import { clock } from '../../shared/clock';
import { resetSecrets } from '../../shared/secrets';
import { verifyCdnUrl, type CdnKeys } from '../../local/cdn';

// D60: the signer's output is a CloudFront canned-policy signed URL, and the local CDN checks it by
// the same rules (signature over the canned policy, path, expiry, key pair id). No runtime needed.
describe('CDN signed download URLs (canned policy)', () => {
  const BASE = 'http://127.0.0.1:4567/cdn';
  const { privateKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
  const pem = privateKey.export({ type: 'pkcs8', format: 'pem' }).toString();
  const keys: CdnKeys = { baseUrl: BASE, keyPairId: 'KTESTKEY123', publicKey: createPublicKey(pem) };
  const saved = { ...process.env };
  let dir: string;

  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), 'cdn-test-'));
    writeFileSync(join(dir, 'secrets.json'), JSON.stringify({ 'cdn-signing-key': pem }));
    Object.assign(process.env, { RUNTIME: 'local', LOCAL_SECRETS_FILE: join(dir, 'secrets.json'), CDN_BASE_URL: BASE, CDN_KEY_PAIR_ID: 'KTESTKEY123' });
    resetSecrets();
  });
  afterAll(() => {
    process.env = saved;
    resetSecrets();
    clock.reset();
    rmSync(dir, { recursive: true, force: true });
  });
  afterEach(() => clock.reset());

  /** Path and query as a server receives them. */
  const requestLine = (url: string) => url.slice(new URL(url).origin.length);
  const nowSeconds = () => Math.floor(Date.now() / 1000);

  it('the signer output verifies under the canned-policy rules (RSA-SHA1 over the policy, CloudFront base64)', async () => {
    const signed = await signDownloadUrl('uploads/sub_1/r1/file_1.jpg', { filename: 'storefront.jpg' });
    const url = new URL(signed.url);
    const expires = Number(url.searchParams.get('Expires'));
    expect(url.searchParams.get('Key-Pair-Id')).toBe('KTESTKEY123');
    expect(new Date(signed.expires_at).getTime()).toBe(expires * 1000);
    expect(expires - nowSeconds()).toBeGreaterThan(DOWNLOAD_URL_TTL_SECONDS - 5);
    expect(expires - nowSeconds()).toBeLessThanOrEqual(DOWNLOAD_URL_TTL_SECONDS);
    // The resource is the URL without the signing parameters, which come last.
    const resource = signed.url.slice(0, signed.url.indexOf('&Expires='));
    expect(resource).toBe(`${BASE}/uploads/sub_1/r1/file_1.jpg?response-content-disposition=attachment%3B%20filename%3D%22storefront.jpg%22`);
    const signature = Buffer.from(url.searchParams.get('Signature')!.replace(/-/g, '+').replace(/_/g, '=').replace(/~/g, '/'), 'base64');
    const policy = `{"Statement":[{"Resource":"${resource}","Condition":{"DateLessThan":{"AWS:EpochTime":${expires}}}}]}`;
    expect(cannedPolicy(resource, expires)).toBe(policy);
    expect(createVerify('RSA-SHA1').update(policy).verify(keys.publicKey, signature)).toBe(true);
    expect(verifyCdnUrl(requestLine(signed.url), keys, nowSeconds())).toEqual({
      ok: true,
      key: 'uploads/sub_1/r1/file_1.jpg',
      disposition: 'attachment; filename="storefront.jpg"',
    });
  });

  it('a tampered signature is refused', async () => {
    const { url } = await signDownloadUrl('uploads/a.jpg');
    const sig = new URL(url).searchParams.get('Signature')!;
    const flipped = sig.slice(0, 10) + (sig[10] === 'A' ? 'B' : 'A') + sig.slice(11);
    expect(verifyCdnUrl(requestLine(url.replace(sig, flipped)), keys, nowSeconds())).toEqual({ ok: false, reason: 'bad_signature' });
  });

  it('the signature of one path does not open another', async () => {
    const { url } = await signDownloadUrl('uploads/a.jpg');
    expect(verifyCdnUrl(requestLine(url.replace('/uploads/a.jpg', '/uploads/b.jpg')), keys, nowSeconds())).toEqual({ ok: false, reason: 'bad_signature' });
  });

  it('another disposition (a changed query) is refused', async () => {
    const { url } = await signDownloadUrl('uploads/a.jpg', { filename: 'a.jpg' });
    expect(verifyCdnUrl(requestLine(url.replace('attachment', 'inline')), keys, nowSeconds())).toEqual({ ok: false, reason: 'bad_signature' });
  });

  it('a later Expires than was signed is refused', async () => {
    const { url } = await signDownloadUrl('uploads/a.jpg');
    const expires = new URL(url).searchParams.get('Expires')!;
    expect(verifyCdnUrl(requestLine(url.replace(`Expires=${expires}`, `Expires=${Number(expires) + 86_400}`)), keys, nowSeconds())).toEqual({ ok: false, reason: 'bad_signature' });
  });

  it('a URL is refused from its Expires second on', async () => {
    const { url } = await signDownloadUrl('uploads/a.jpg');
    const expires = Number(new URL(url).searchParams.get('Expires'));
    expect(verifyCdnUrl(requestLine(url), keys, expires - 1).ok).toBe(true);
    expect(verifyCdnUrl(requestLine(url), keys, expires)).toEqual({ ok: false, reason: 'expired' });
  });

  it('a URL signed with another key pair id is refused', async () => {
    const { url } = await signDownloadUrl('uploads/a.jpg');
    expect(verifyCdnUrl(requestLine(url), { ...keys, keyPairId: 'KOTHER' }, nowSeconds())).toEqual({ ok: false, reason: 'unknown_key' });
  });

  it('a URL without the signing parameters is refused', () => {
    expect(verifyCdnUrl('/cdn/uploads/a.jpg', keys, nowSeconds())).toEqual({ ok: false, reason: 'missing_signature' });
  });

  it('a URL signed by another private key is refused', async () => {
    const other = generateKeyPairSync('rsa', { modulusLength: 2048 }).publicKey;
    const { url } = await signDownloadUrl('uploads/a.jpg');
    expect(verifyCdnUrl(requestLine(url), { ...keys, publicKey: other }, nowSeconds())).toEqual({ ok: false, reason: 'bad_signature' });
  });

  it('a non-ASCII file name is kept (RFC 6266 filename*) and the URL still verifies', async () => {
    const { url } = await signDownloadUrl('uploads/a.jpg', { filename: 'café «1».jpg' });
    const v = verifyCdnUrl(requestLine(url), keys, nowSeconds());
    expect(v).toEqual({ ok: true, key: 'uploads/a.jpg', disposition: `attachment; filename="caf_ _1_.jpg"; filename*=UTF-8''caf%C3%A9%20%C2%AB1%C2%BB.jpg` });
  });
});
