/**
 * Which organization, key and environment a secret belongs to, remembered by this process for the
 * secrets it has authenticated (keyed by the secret's SHA-256, never the secret). These facts never
 * change for a secret: a key is issued to one organization and environment, and a rotation issues
 * a new secret. The memo grants nothing: every request is still authenticated by the uncached
 * conditional write on the secret's item, so a revoke takes effect on the next request (D6). It
 * only lets the second step's tenant reads start beside that write (issue 15), and its guess is
 * used only when the write confirms the same owner.
 */
import type { BuyerPrincipal, Env } from '../types';

export interface SecretOwner {
  orgId: string;
  keyId: string;
  env: Env;
}

/** Enough for every key a warm function meets; the oldest entry goes first. */
const MAX_ENTRIES = 10_000;
const owners = new Map<string, SecretOwner>();

/** The owner this process saw for the secret with this SHA-256, if any. */
export function knownOwner(hash: string): SecretOwner | undefined {
  return owners.get(hash);
}

/** Remembers the owner of the secret a request was just authenticated with. */
export function rememberOwner(p: BuyerPrincipal): void {
  if (!p.secretHash || owners.has(p.secretHash)) return;
  if (owners.size >= MAX_ENTRIES) owners.delete(owners.keys().next().value!);
  owners.set(p.secretHash, { orgId: p.orgId, keyId: p.keyId, env: p.env });
}

/**
 * Forgets a secret that failed to authenticate (revoked, or its overlap ended), so requests with
 * it no longer start reads of its former owner's items.
 */
export function forgetOwner(hash: string): void {
  owners.delete(hash);
}

/** The same owner: the early reads were for this principal's organization and environment. */
export function sameOwner(o: SecretOwner, p: BuyerPrincipal): boolean {
  return o.orgId === p.orgId && o.keyId === p.keyId && o.env === p.env;
}
