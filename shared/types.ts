/** Types shared across domain modules. */
import type { Lot } from './ledger/lots';
export type Env = 'live' | 'test';
export const ENVIRONMENTS: readonly Env[] = ['live', 'test'];

/** Who performed an action (D39). */
export type Actor = { type: 'api_key' | 'worker' | 'system'; id: string };

/** The authenticated caller of a buyer route. */
export interface BuyerPrincipal {
  kind: 'api_key';
  orgId: string;
  keyId: string;
  env: Env;
  scopes: string[];
  /** True when the presented secret is a rotated-out one still inside its 24 h overlap (D6). */
  previousSecret: boolean;
  /** The presented secret's lookup item (its SHA-256). */
  secretHash?: string;
}

/** The authenticated caller of a worker route (D9). */
export interface WorkerPrincipal {
  kind: 'worker';
  workerId: string;
  /** Real workers are `live`; the sandbox's simulated workers are `test` (D40). */
  env: Env;
}

export type Principal = BuyerPrincipal | WorkerPrincipal;

/**
 * Tenant items read (strongly consistent) beside the rate-limit decision, for the domain function:
 * the organization and the balance on every buyer route, the settings and credit lots when the
 * route declares them (`reads`). Absent when DynamoDB left one unprocessed (the function reads it).
 */
export interface TenantReads {
  org?: Record<string, unknown>;
  balance?: Record<string, unknown>;
  settings?: Record<string, unknown>;
  lots?: Lot[];
}
