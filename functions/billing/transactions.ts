import * as z from 'zod';
import { route } from '../../shared/http/route';
import { listQuery } from '../../shared/http/schemas';
import { listTransactions } from '../../shared/billing';
import { TRANSACTION_TYPES } from '../../shared/ledger/lots';

// D31: the spec's six types plus `escrow`.
const query = listQuery({ type: z.enum(TRANSACTION_TYPES as [string, ...string[]]).optional() });

export const handler = route('billing.transactions', { query }, async (req) => ({
  body: await listTransactions(req.buyer, req.query as Parameters<typeof listTransactions>[1]),
}));
