import * as z from '../../shared/zod';
import { routeWithoutIdempotencyKey } from '../../shared/http/route-without-key';
import { listQuery } from '../../shared/http/schemas';
import { listTransactions } from '../../shared/billing';
import { TRANSACTION_TYPES } from '../../shared/ledger/lots';

// D31: the spec's six types plus `escrow`.
const query = listQuery({ type: z.optional(z.enum(TRANSACTION_TYPES as [string, ...string[]])) });

export const handler = routeWithoutIdempotencyKey('billing.transactions', { query }, async (req) => ({
  body: await listTransactions(req.buyer, req.query as Parameters<typeof listTransactions>[1]),
}));
