/** SSRF guard (D36, D44): table-driven; every refused range, in every textual form. */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { classifyAddress, resolvePublic, UnsafeUrl } from '../../shared/webhooks/ssrf';
import { postWebhook } from '../../shared/webhooks/sender';

const REFUSED: [string, string][] = [
  ['0.0.0.0', '0/8'],
  ['0.1.2.3', '0/8'],
  ['10.0.0.1', 'private 10/8'],
  ['172.16.0.1', 'private 172.16/12'],
  ['172.31.255.255', 'private 172.16/12'],
  ['192.168.1.1', 'private 192.168/16'],
  ['127.0.0.1', 'loopback'],
  ['127.255.255.254', 'loopback 127/8'],
  ['169.254.169.254', 'link-local (metadata service)'],
  ['169.254.0.1', 'link-local'],
  ['100.64.0.1', 'CGNAT 100.64/10'],
  ['100.127.255.255', 'CGNAT 100.64/10'],
  ['224.0.0.1', 'multicast'],
  ['255.255.255.255', 'broadcast'],
  ['198.18.0.1', 'benchmarking'],
  ['::1', 'IPv6 loopback'],
  ['::', 'IPv6 unspecified'],
  ['fc00::1', 'IPv6 ULA'],
  ['fd12:3456:789a::1', 'IPv6 ULA'],
  ['fe80::1', 'IPv6 link-local'],
  ['fe80::1%eth0', 'IPv6 link-local with zone'],
  ['ff02::1', 'IPv6 multicast'],
  ['::ffff:127.0.0.1', 'IPv4-mapped loopback'],
  ['::ffff:7f00:1', 'IPv4-mapped loopback (hex)'],
  ['::ffff:10.0.0.1', 'IPv4-mapped private'],
  ['::ffff:169.254.169.254', 'IPv4-mapped metadata'],
  ['::ffff:a9fe:a9fe', 'IPv4-mapped metadata (hex)'],
  ['::ffff:100.64.0.1', 'IPv4-mapped CGNAT'],
  ['::ffff:0.0.0.0', 'IPv4-mapped 0/8'],
  ['::ffff:192.168.0.1', 'IPv4-mapped private'],
  ['0:0:0:0:0:ffff:7f00:0001', 'IPv4-mapped loopback (long form)'],
  ['::127.0.0.1', 'IPv4-compatible loopback'],
  ['64:ff9b::10.0.0.1', 'NAT64 of private'],
  ['64:ff9b:1::a9fe:a9fe', 'local-use NAT64 (64:ff9b:1::/48)'],
  ['2002:a9fe:a9fe::1', '6to4 of metadata'],
  ['[::1]', 'bracketed IPv6 loopback'],
];

const ACCEPTED = ['93.184.215.14', '8.8.8.8', '1.1.1.1', '2606:4700:4700::1111', '::ffff:8.8.8.8', '100.128.0.1', '172.32.0.1'];

describe('SSRF guard: address classification (D36)', () => {
  it.each(REFUSED)('refuses %s (%s)', (ip) => {
    expect(classifyAddress(ip).ok).toBe(false);
  });
  it.each(ACCEPTED)('accepts public %s', (ip) => {
    expect(classifyAddress(ip)).toEqual({ ok: true });
  });
});

describe('SSRF guard: URLs (D36, D44)', () => {
  const strict = { allowLoopback: false };
  const fakeDns = (answers: Record<string, string[]>) => async (host: string) => {
    const a = answers[host];
    if (!a) throw new Error('ENOTFOUND');
    return a;
  };

  const URLS: [string, string][] = [
    ['https://10.0.0.1/hook', 'non_public_address'],
    ['https://169.254.169.254/latest/meta-data', 'non_public_address'],
    ['https://[::ffff:169.254.169.254]/', 'non_public_address'],
    ['https://[::ffff:127.0.0.1]/', 'non_public_address'],
    ['https://[fd00::1]/', 'non_public_address'],
    ['https://[fe80::1]/', 'non_public_address'],
    ['https://0x7f.1/', 'non_public_address'], // WHATWG URL normalises to 127.0.0.1
    ['https://2130706433/', 'non_public_address'], // = 127.0.0.1
    ['https://100.64.1.1/', 'non_public_address'],
    ['https://0.0.0.0/', 'non_public_address'],
    ['https://127.0.0.1/', 'non_public_address'],
    ['https://localhost/', 'non_public_address'],
    ['https://rebind.example/', 'non_public_address'], // one public and one private answer
    ['http://93.184.215.14/', 'https_required'],
    ['ftp://93.184.215.14/', 'https_required'],
    ['https://user:pw@93.184.215.14/', 'invalid_url'],
    ['not a url', 'invalid_url'],
    ['https://nxdomain.example/', 'unresolvable_host'],
  ];
  const dns = fakeDns({ localhost: ['127.0.0.1', '::1'], 'rebind.example': ['93.184.215.14', '10.1.2.3'], 'public.example': ['93.184.215.14'] });

  it.each(URLS)('refuses %s (%s)', async (url, code) => {
    await expect(resolvePublic(url, strict, dns)).rejects.toMatchObject({ name: 'UnsafeUrl', code });
  });

  it('accepts an https URL whose every address is public', async () => {
    await expect(resolvePublic('https://public.example/hooks', strict, dns)).resolves.toMatchObject({ addresses: ['93.184.215.14'] });
  });

  it('D44: the local loopback allowance admits plain-http loopback names only', async () => {
    const dev = { allowLoopback: true };
    await expect(resolvePublic('http://127.0.0.1:4000/hook', dev, dns)).resolves.toBeTruthy();
    await expect(resolvePublic('http://localhost:4000/hook', dev, dns)).resolves.toBeTruthy();
    await expect(resolvePublic('http://[::1]:4000/hook', dev, dns)).resolves.toBeTruthy();
    await expect(resolvePublic('http://10.0.0.1/hook', dev, dns)).rejects.toBeInstanceOf(UnsafeUrl);
    await expect(resolvePublic('http://[::ffff:127.0.0.1]/hook', dev, dns)).rejects.toBeInstanceOf(UnsafeUrl);
    await expect(resolvePublic('http://public.example/hook', dev, dns)).rejects.toMatchObject({ code: 'https_required' });
  });
});

describe('SSRF guard: what a refusal tells (D36)', () => {
  const strict = { allowLoopback: false };
  it('a name that resolves to a private address is refused without the address (no DNS answers through the API)', async () => {
    const err = await resolvePublic('https://internal.example/', strict, async () => ['10.1.2.3']).catch((e: Error) => e);
    expect(err).toMatchObject({ name: 'UnsafeUrl', code: 'non_public_address' });
    expect((err as Error).message).not.toContain('10.1.2.3');
  });
  it('an address written in the URL is named in the refusal', async () => {
    await expect(resolvePublic('https://10.1.2.3/', strict)).rejects.toThrow(/10\.1\.2\.3/);
  });
});

describe('one attempt keeps to its time-out, resolving the name included (D37)', () => {
  const slowResolver = (ms: number, addresses: string[]) => () => new Promise<string[]>((r) => setTimeout(() => r(addresses), ms));

  it('a name server slower than the time-out ends the attempt as a timeout at the time-out', async () => {
    const r = await postWebhook('https://slow.example/hook', '{}', {}, { allowLoopback: false }, slowResolver(3_000, ['93.184.215.14']), 300);
    expect(r).toMatchObject({ ok: false, statusCode: null, error: 'timeout' });
    expect(r.durationMs).toBeLessThan(3_000);
  });

  it('the time spent resolving comes off the time the receiver has to answer', async () => {
    const server = http.createServer((_req, res) => setTimeout(() => res.end('ok'), 700));
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    try {
      const port = (server.address() as AddressInfo).port;
      // 600 ms to resolve + 700 ms to answer > 1 s: a timeout, though either alone fits.
      const late = await postWebhook(`http://localhost:${port}/hook`, '{}', {}, { allowLoopback: true }, slowResolver(600, ['127.0.0.1']), 1_000);
      expect(late).toMatchObject({ ok: false, error: 'timeout' });
      const inTime = await postWebhook(`http://localhost:${port}/hook`, '{}', {}, { allowLoopback: true }, slowResolver(0, ['127.0.0.1']), 5_000);
      expect(inTime).toMatchObject({ ok: true, statusCode: 200 });
    } finally {
      server.closeAllConnections();
      await new Promise((r) => server.close(r));
    }
  });

  it('a 2xx status line within the time-out is a success even when its body never finishes', async () => {
    const server = http.createServer((_req, res) => {
      res.writeHead(200, { 'Content-Length': '100' });
      res.write('partial'); // the other 93 bytes never come
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    try {
      const port = (server.address() as AddressInfo).port;
      const r = await postWebhook(`http://localhost:${port}/hook`, '{}', {}, { allowLoopback: true }, async () => ['127.0.0.1'], 800);
      expect(r).toMatchObject({ ok: true, statusCode: 200, error: null });
    } finally {
      server.closeAllConnections();
      await new Promise((r) => server.close(r));
    }
  });

  it('a receiver that refuses the connection fails the attempt with the network error code, not its message', async () => {
    const server = http.createServer();
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    const port = (server.address() as AddressInfo).port;
    await new Promise((r) => server.close(r)); // nothing listens there now
    const r = await postWebhook(`http://localhost:${port}/hook`, '{}', {}, { allowLoopback: true }, async () => ['127.0.0.1'], 800);
    expect(r).toMatchObject({ ok: false, statusCode: null, error: 'ECONNREFUSED' });
  });
});
