/**
 * What a mutating domain function needs to know about the request that caused it: who acted (D39),
 * the request id (audit, D49) and the idempotency handle whose response it records in its own
 * transaction (D11).
 */
import type { IdempotencyHandle } from './idempotency';
import type { Tx } from './db/tx';
import type { Actor } from './types';

export interface MutationContext {
  actor: Actor;
  requestId: string | null;
  idem: IdempotencyHandle | null;
}

export const systemContext = (id = 'system'): MutationContext => ({
  actor: { type: 'system', id },
  requestId: null,
  idem: null,
});

/** Record the response in the transaction when the request carries an Idempotency-Key. */
export function recordResponse(ctx: MutationContext, tx: Tx, body: unknown, status?: number): void {
  ctx.idem?.record(tx, body, status);
}
