/** Billing reads: the credit balance (spec + D13 header value) and the transaction list (D31). */
import { indexKeys } from '../db/keys';
import { queryPage, listBody } from '../db/query';
import { binding } from '../cursor';
import { readBalanceItem } from '../ledger/balance';
import type { TransactionType } from '../ledger/lots';
import { organizationCreatedAt } from '../orgs';
import type { BuyerPrincipal, TenantReads } from '../types';

export { createCheckoutSession } from './checkout';
export { presentSession } from './checkout-session';
export { confirmCheckout } from './confirm-checkout';

/** The balance; `pre` is the organization and balance already read (strongly consistent) for the request. */
export async function getCredits(p: BuyerPrincipal, pre?: TenantReads) {
  const b = pre && 'balance' in pre ? pre.balance : await readBalanceItem(p.orgId, p.env);
  const available = Number(b?.available_cents ?? 0);
  const held = Number(b?.held_cents ?? 0);
  return {
    object: 'credit_balance' as const,
    available_cents: available,
    held_cents: held,
    total_cents: available + held,
    // Spec variant name of the available balance.
    balance_cents: available,
    currency: 'usd' as const,
    // D59: never null; a balance that never moved was last updated when the organization was created.
    updated_at: (b?.updated_at as string | undefined) ?? ((pre?.org?.created_at as string | undefined) ?? (await organizationCreatedAt(p.orgId))),
  };
}

export function presentTransaction(t: Record<string, unknown>) {
  return {
    id: t.id as string,
    object: 'credit_transaction' as const,
    type: t.type as TransactionType,
    amount_cents: Number(t.amount_cents),
    description: t.description as string,
    // Spec: present on job-related rows / deductions / expiring credits.
    ...(t.job_id ? { job_id: t.job_id as string } : {}),
    ...(t.submission_id ? { submission_id: t.submission_id as string } : {}),
    ...(t.expires_at ? { expires_at: t.expires_at as string } : {}),
    created_at: t.created_at as string,
  };
}

export async function listTransactions(p: BuyerPrincipal, q: { type?: TransactionType; limit: number; cursor?: string }) {
  const ix = q.type ? indexKeys.tenantTransactionsByType(p.orgId, p.env, q.type) : indexKeys.tenantTransactions(p.orgId, p.env);
  const page = await queryPage<Record<string, unknown>>({
    index: ix.index,
    pk: ix.pk,
    limit: q.limit,
    cursor: q.cursor,
    binding: binding({ what: 'transactions', org: p.orgId, env: p.env, type: q.type }),
  });
  return listBody(page.items.map(presentTransaction), page);
}
