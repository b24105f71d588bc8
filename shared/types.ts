/** Types shared across domain modules. */
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
  /** The presented secret's lookup item and the minute (Unix minutes) it last recorded a use. */
  secretHash?: string;
  usedMinute?: number;
}

/** The authenticated caller of a worker route (D9). */
export interface WorkerPrincipal {
  kind: 'worker';
  workerId: string;
  /** Real workers are `live`; the sandbox's simulated workers are `test` (D40). */
  env: Env;
}

export type Principal = BuyerPrincipal | WorkerPrincipal;
