/**
 * Domain-test fixtures for the ledger: a table of its own on the run's DynamoDB Local, a real
 * organization (signup), and the D31 identities read back from the table.
 */
import { randomBytes } from 'node:crypto';
import { QueryCommand } from '@aws-sdk/lib-dynamodb';
import { ensureTable, localDynamoClient } from '../../local/dynamodb';
import { resetConfig } from '../../shared/config';
import { db, resetClients, tableName } from '../../shared/db/client';
import { keys, indexKeys } from '../../shared/db/keys';
import { Tx } from '../../shared/db/tx';
import { ConditionFailed } from '../../shared/errors';
import { signup } from '../../shared/orgs';
import { readBalance } from '../../shared/ledger/balance';
import { addApprovalCharges, approvalAllowed } from '../../shared/ledger/escrow';
import { getJobItem } from '../../shared/jobs';
import { systemContext, type MutationContext } from '../../shared/context';
import type { BuyerPrincipal, Env } from '../../shared/types';

export async function useFreshTable(): Promise<void> {
  const endpoint = process.env.DYNAMODB_ENDPOINT;
  if (!endpoint) throw new Error('DYNAMODB_ENDPOINT is not set: run through jest (globalSetup)');
  Object.assign(process.env, {
    RUNTIME: 'local',
    TABLE_NAME: `ledger-${randomBytes(6).toString('hex')}`,
    CURSOR_SECRET: 'test-cursor-secret',
    AWS_REGION: 'us-east-1',
  });
  resetConfig();
  resetClients();
  const client = localDynamoClient(endpoint);
  await ensureTable(client, process.env.TABLE_NAME!);
  client.destroy();
}

export const ctx = (): MutationContext => systemContext('test');

export async function newBuyer(env: Env = 'live'): Promise<BuyerPrincipal> {
  const s = await signup(ctx(), { name: 'Ledger test', email: `t-${randomBytes(8).toString('hex')}@example.com` });
  return { kind: 'api_key', orgId: s.organization.id, keyId: s.api_key.id, env, scopes: [], previousSecret: false };
}

async function queryAll(pk: string): Promise<Record<string, unknown>[]> {
  const items: Record<string, unknown>[] = [];
  let start: Record<string, unknown> | undefined;
  do {
    const out = await db().send(
      new QueryCommand({
        TableName: tableName(),
        KeyConditionExpression: 'PK = :pk',
        ExpressionAttributeValues: { ':pk': pk },
        ConsistentRead: true,
        ExclusiveStartKey: start,
      }),
    );
    items.push(...(out.Items ?? []));
    start = out.LastEvaluatedKey;
  } while (start);
  return items;
}

export async function ledgerRows(p: BuyerPrincipal) {
  return queryAll(indexKeys.tenantTransactions(p.orgId, p.env).pk);
}

/** The D31 identities and the lot/escrow breakdowns, read back from the table. */
export async function ledgerState(p: BuyerPrincipal, jobIds: string[]) {
  const rows = await ledgerRows(p);
  const sum = (...types: string[]) => rows.filter((r) => types.includes(r.type as string)).reduce((s, r) => s + Number(r.amount_cents), 0);
  const bal = await readBalance(p.orgId, p.env);
  const jobs = await Promise.all(jobIds.map((id) => getJobItem(id)));
  return {
    available: bal.available,
    held: bal.held,
    availableFromRows: sum('purchase', 'free_tier', 'bonus', 'expiration', 'escrow', 'refund'),
    heldFromRows: -sum('escrow') - sum('refund') + sum('deduction'),
    lotsRemaining: bal.lots.reduce((s, l) => s + l.remaining, 0),
    escrowOnJobs: jobs.reduce((s, j) => s + Number(j?.escrow_remaining_cents ?? 0), 0),
    negativeLots: bal.lots.filter((l) => l.remaining < 0).length,
    rows,
  };
}

/**
 * Approve `files` of a job the way the pipeline does: read the job, check `approvalAllowed`, add
 * `addApprovalCharges` to a real Tx, commit; on a lost race re-read and decide again.
 * Returns false when the approval is refused (no charge, D29).
 */
export async function approve(jobId: string, submissionId: string, files: number): Promise<boolean> {
  for (let attempt = 0; attempt < 30; attempt++) {
    const job = (await getJobItem(jobId))!;
    if (!approvalAllowed(job, files)) return false;
    const tx = new Tx();
    tx.put('submission', { ...keys.submission(submissionId), entity: 'submission', id: submissionId, job_id: jobId, status: 'approved' });
    // The pipeline's accept/upload would have counted these as pending; here nothing is pending.
    addApprovalCharges(tx, { job, submissionId, files, pendingReleased: 0 });
    try {
      await tx.commit();
      return true;
    } catch (e) {
      if (!(e instanceof ConditionFailed)) throw e;
    }
  }
  throw new Error('approve: too much contention');
}

/** Event types written for the tenant (the outbox items), oldest first. */
export async function listEvents(p: BuyerPrincipal): Promise<string[]> {
  const ix = indexKeys.tenantEvents(p.orgId, p.env);
  const out = await db().send(
    new QueryCommand({ TableName: tableName(), IndexName: ix.index, KeyConditionExpression: 'GSI1PK = :pk', ExpressionAttributeValues: { ':pk': ix.pk } }),
  );
  return (out.Items ?? []).map((e) => e.type as string);
}
