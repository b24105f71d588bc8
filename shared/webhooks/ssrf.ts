/**
 * SSRF guard (D36, D44): a webhook URL must be https and resolve only to public addresses. Checked
 * when the URL is saved and again at connect time, where the connection is pinned to the address
 * that was checked (so a DNS answer that changes between check and connect, DNS rebinding, cannot
 * reach an internal address).
 *
 * Refused: IPv4 0/8, 10/8, 100.64/10 (CGNAT), 127/8, 169.254/16 (link-local, incl. the metadata
 * service 169.254.169.254), 172.16/12, 192.0.0/24, 192.0.2/24, 192.168/16, 198.18/15,
 * 198.51.100/24, 203.0.113/24, 224/4, 240/4 (incl. broadcast); IPv6 ::, ::1, fc00::/7 (ULA),
 * fe80::/10 (link-local), fec0::/10, ff00::/8, 100::/64, 2001:db8::/32, 2001::/32 (Teredo), and any
 * IPv4 embedded in IPv6 (::ffff:0:0/96 mapped, ::/96 compatible, 64:ff9b::/96 NAT64, 2002::/16
 * 6to4) whose IPv4 is refused.
 *
 * The local runtime (only) accepts loopback receivers named `localhost`, `127.0.0.1` or `[::1]`,
 * over http or https, unless WEBHOOK_ALLOW_LOOPBACK=false (D44). The deployed stack never does.
 */
import { lookup } from 'node:dns/promises';
import { isIP } from 'node:net';

type V4Range = [number, number]; // [network as uint32, prefix length]

const v4 = (a: string, len: number): V4Range => [parseV4(a)!, len];

const BLOCKED_V4: V4Range[] = [
  v4('0.0.0.0', 8),
  v4('10.0.0.0', 8),
  v4('100.64.0.0', 10),
  v4('127.0.0.0', 8),
  v4('169.254.0.0', 16),
  v4('172.16.0.0', 12),
  v4('192.0.0.0', 24),
  v4('192.0.2.0', 24),
  v4('192.168.0.0', 16),
  v4('198.18.0.0', 15),
  v4('198.51.100.0', 24),
  v4('203.0.113.0', 24),
  v4('224.0.0.0', 4),
  v4('240.0.0.0', 4),
];

function parseV4(s: string): number | null {
  const parts = s.split('.');
  if (parts.length !== 4) return null;
  let n = 0;
  for (const p of parts) {
    if (!/^\d{1,3}$/.test(p) || Number(p) > 255) return null;
    n = n * 256 + Number(p);
  }
  return n >>> 0;
}

function inV4(n: number, [net, len]: V4Range): boolean {
  if (len === 0) return true;
  const mask = len === 32 ? 0xffffffff : (~0 << (32 - len)) >>> 0;
  return ((n & mask) >>> 0) === ((net & mask) >>> 0);
}

/** Eight 16-bit groups of an IPv6 address (embedded dotted IPv4 tails included), or null. */
export function parseV6(s: string): number[] | null {
  let addr = s.toLowerCase();
  if (addr.startsWith('[') && addr.endsWith(']')) addr = addr.slice(1, -1);
  const zone = addr.indexOf('%');
  if (zone >= 0) addr = addr.slice(0, zone);
  if (isIP(addr) !== 6) return null;
  const lastColon = addr.lastIndexOf(':');
  const last = addr.slice(lastColon + 1);
  if (last.includes('.')) {
    // A dotted IPv4 tail (e.g. ::ffff:127.0.0.1) becomes its two hex groups.
    const n = parseV4(last);
    if (n === null) return null;
    addr = `${addr.slice(0, lastColon + 1)}${(n >>> 16).toString(16)}:${(n & 0xffff).toString(16)}`;
  }
  const [head, rest] = addr.includes('::') ? addr.split('::') : [addr, null];
  const h = head ? head.split(':').map((x) => parseInt(x, 16)) : [];
  const r = rest ? rest.split(':').map((x) => parseInt(x, 16)) : [];
  const groups = rest === null ? h : [...h, ...Array(8 - h.length - r.length).fill(0), ...r];
  if (groups.length !== 8 || groups.some((g) => Number.isNaN(g) || g < 0 || g > 0xffff)) return null;
  return groups;
}

const v4FromGroups = (hi: number, lo: number) => ((hi << 16) >>> 0) + lo;

export type AddressVerdict = { ok: true } | { ok: false; reason: string };

function v4Verdict(n: number): AddressVerdict {
  for (const r of BLOCKED_V4) if (inV4(n, r)) return { ok: false, reason: 'non-public IPv4 address' };
  return { ok: true };
}

/** Is this IP address (v4 or v6, any textual form) public? */
export function classifyAddress(ip: string): AddressVerdict {
  const n4 = parseV4(ip);
  if (n4 !== null) return v4Verdict(n4);
  const g = parseV6(ip);
  if (!g) return { ok: false, reason: 'not an IP address' };
  const zeros = (from: number, to: number) => g.slice(from, to).every((x) => x === 0);
  const embedded = (reason: string): AddressVerdict => {
    const v = v4Verdict(v4FromGroups(g[6]!, g[7]!));
    return v.ok ? v : { ok: false, reason: `${reason} of a non-public IPv4 address` };
  };
  if (zeros(0, 8)) return { ok: false, reason: 'unspecified address' };
  if (zeros(0, 7) && g[7] === 1) return { ok: false, reason: 'IPv6 loopback' };
  if (zeros(0, 5) && g[5] === 0xffff) return embedded('IPv4-mapped form');
  if (zeros(0, 4) && g[4] === 0xffff && g[5] === 0) return embedded('IPv4-translated form');
  if (zeros(0, 6)) return embedded('IPv4-compatible form');
  if (g[0] === 0x64 && g[1] === 0xff9b && zeros(2, 6)) return embedded('NAT64 form');
  if (g[0] === 0x64 && g[1] === 0xff9b && g[2] === 1) return { ok: false, reason: 'local-use NAT64 address' }; // 64:ff9b:1::/48 (RFC 8215)
  if (g[0] === 0x2002) {
    const v = v4Verdict(v4FromGroups(g[1]!, g[2]!));
    if (!v.ok) return { ok: false, reason: '6to4 form of a non-public IPv4 address' };
  }
  if ((g[0]! & 0xfe00) === 0xfc00) return { ok: false, reason: 'IPv6 unique local address' };
  if ((g[0]! & 0xffc0) === 0xfe80) return { ok: false, reason: 'IPv6 link-local address' };
  if ((g[0]! & 0xffc0) === 0xfec0) return { ok: false, reason: 'IPv6 site-local address' };
  if ((g[0]! & 0xff00) === 0xff00) return { ok: false, reason: 'IPv6 multicast address' };
  if (g[0] === 0x0100 && zeros(1, 4)) return { ok: false, reason: 'IPv6 discard prefix' };
  if (g[0] === 0x2001 && g[1] === 0x0db8) return { ok: false, reason: 'IPv6 documentation prefix' };
  if (g[0] === 0x2001 && g[1] === 0) return { ok: false, reason: 'Teredo address' };
  return { ok: true };
}

export function isLoopbackAddress(ip: string): boolean {
  const n4 = parseV4(ip);
  if (n4 !== null) return n4 >>> 24 === 127;
  const g = parseV6(ip);
  return !!g && g.slice(0, 7).every((x) => x === 0) && g[7] === 1;
}

const LOOPBACK_NAMES = new Set(['localhost', '127.0.0.1', '[::1]']);

export interface UrlPolicy {
  /** D44: the local runtime's loopback allowance. */
  allowLoopback: boolean;
}

export class UnsafeUrl extends Error {
  override name = 'UnsafeUrl';
  constructor(
    message: string,
    readonly code: 'invalid_url' | 'https_required' | 'unresolvable_host' | 'non_public_address',
  ) {
    super(message);
  }
}

/** The URL's syntax and scheme; returns the parsed URL and whether the loopback allowance applies. */
export function checkUrlSyntax(raw: string, policy: UrlPolicy): { url: URL; loopbackDev: boolean } {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw new UnsafeUrl('not a valid absolute URL', 'invalid_url');
  }
  if (url.username || url.password) throw new UnsafeUrl('URLs with credentials are not accepted', 'invalid_url');
  const loopbackDev = policy.allowLoopback && LOOPBACK_NAMES.has(url.hostname.toLowerCase());
  if (url.protocol !== 'https:' && !(loopbackDev && url.protocol === 'http:')) {
    throw new UnsafeUrl('the URL must use https', 'https_required');
  }
  if (url.hash) throw new UnsafeUrl('the URL must not contain a fragment', 'invalid_url');
  return { url, loopbackDev };
}

export type Resolver = (host: string) => Promise<string[]>;

export const systemResolver: Resolver = async (host) => (await lookup(host, { all: true, verbatim: true })).map((a) => a.address);

/**
 * Resolves the URL's host and checks every address. Returns the addresses to connect to (the
 * caller pins the connection to them). Throws `UnsafeUrl`.
 */
export async function resolvePublic(raw: string, policy: UrlPolicy, resolve: Resolver = systemResolver): Promise<{ url: URL; addresses: string[] }> {
  const { url, loopbackDev } = checkUrlSyntax(raw, policy);
  const host = url.hostname.startsWith('[') ? url.hostname.slice(1, -1) : url.hostname;
  let addresses: string[];
  if (parseV4(host) !== null || isIP(host) === 6) addresses = [host];
  else {
    try {
      addresses = await resolve(host);
    } catch {
      throw new UnsafeUrl(`the host ${host} does not resolve`, 'unresolvable_host');
    }
    if (!addresses.length) throw new UnsafeUrl(`the host ${host} does not resolve`, 'unresolvable_host');
  }
  const literal = addresses.length === 1 && addresses[0] === host;
  for (const a of addresses) {
    if (loopbackDev && isLoopbackAddress(a)) continue;
    const v = classifyAddress(a);
    // A resolved name's address is not shown: the check would otherwise answer DNS questions.
    if (!v.ok) throw new UnsafeUrl(literal ? `the URL names a ${v.reason} (${a}); only public addresses are accepted` : `the URL's host resolves to a ${v.reason}; only public addresses are accepted`, 'non_public_address');
  }
  return { url, addresses };
}
