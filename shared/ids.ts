/**
 * Identifiers (D1): `<prefix>_<ULID>`, 26 Crockford base32 characters, sortable by creation time.
 */
import { getRandomValues } from 'node:crypto';
import { ulid, decodeTime, monotonicFactory } from 'ulid';
import { now } from './clock';

/**
 * The random part's source: the system CSPRNG, drawn 4 KiB at a time. The package's default asks
 * the CSPRNG for one byte per character (16 calls per id), a visible share of a request's CPU.
 * Each character takes one byte: 256 is a multiple of 32, so every character stays uniform.
 */
const pool = new Uint8Array(4096);
let drawn = pool.length;
function prng(): number {
  if (drawn === pool.length) {
    getRandomValues(pool);
    drawn = 0;
  }
  return pool[drawn++]! / 256;
}

export const ID_PREFIXES = {
  job: 'job',
  file: 'file',
  submission: 'sub',
  worker: 'wkr',
  transaction: 'crtx',
  event: 'evt',
  request: 'req',
  organization: 'org',
  apiKey: 'key',
  webhookEndpoint: 'we',
  checkoutSession: 'cs',
  audit: 'aud',
  lot: 'lot',
  payout: 'pay',
  export: 'exp',
} as const;
export type IdKind = keyof typeof ID_PREFIXES;

/**
 * A new id of the given kind, timestamped by the (injectable) clock. Not the monotonic factory:
 * its time part must always be the clock's, even when a test moves the clock backwards.
 */
export function newId(kind: IdKind): string {
  return `${ID_PREFIXES[kind]}_${ulid(now().getTime(), prng)}`;
}

/**
 * Ids of one kind that all carry the instant `at`, increasing in the order they are drawn (the
 * events of one transaction: their ids sort as they were emitted, and their time is their
 * `created_at`).
 */
export function idsAt(kind: IdKind, at: Date): () => string {
  const next = monotonicFactory(prng);
  return () => `${ID_PREFIXES[kind]}_${next(at.getTime())}`;
}

const ULID_RE = /^[0-9A-HJKMNP-TV-Z]{26}$/;

/** True when `id` is well formed for `kind` (malformed ids answer 404, D43). */
export function isId(kind: IdKind, id: string): boolean {
  const prefix = `${ID_PREFIXES[kind]}_`;
  return id.startsWith(prefix) && ULID_RE.test(id.slice(prefix.length));
}

/**
 * The id of `kind` that shares `from`'s time and randomness (e.g. the checkout session of a
 * low-balance event's top-up): one per `from`, derived again by every run that needs it.
 */
export function derivedId(kind: IdKind, from: string): string {
  return `${ID_PREFIXES[kind]}_${from.slice(from.indexOf('_') + 1)}`;
}

/** Creation time encoded in an id. */
export function idTime(id: string): Date {
  return new Date(decodeTime(id.slice(id.indexOf('_') + 1)));
}

const CROCKFORD = '0123456789ABCDEFGHJKMNPQRSTVWXYZ';

/** The smallest ULID string of an instant: `id > ulidFloor(t)` selects ids created after t. */
export function ulidFloor(kind: IdKind, t: Date, fill: '0' | 'Z' = '0'): string {
  // ULID time is 48 bits from the Unix epoch: an instant before 1970 selects from the first id.
  let ms = Math.min(Math.max(0, t.getTime()), 2 ** 48 - 1);
  let time = '';
  for (let i = 0; i < 10; i++) {
    time = CROCKFORD[ms % 32] + time;
    ms = Math.floor(ms / 32);
  }
  return `${ID_PREFIXES[kind]}_${time}${fill.repeat(16)}`;
}
