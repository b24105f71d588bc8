/**
 * Domain-test fixtures for the ledger: a table of its own on the run's DynamoDB Local, a real
 * organization (signup), and the D31 identities read back from the table.
 */
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { startS3Emulator } from '../../local/s3';
import { ensureLocalSecrets } from '../../local/secrets';
import { objectKeys, putObject, resetS3 } from '../../shared/storage/s3';
import { QueryCommand } from '@aws-sdk/lib-dynamodb';
import { ensureTable, localDynamoClient } from '../../local/dynamodb';
import { indexesCaughtUp } from '../../local/index-lag';
import { resetConfig } from '../../shared/config';
import { db, resetClients, tableName } from '../../shared/db/client';
import { keys, indexKeys, type Key } from '../../shared/db/keys';
import { Tx } from '../../shared/db/tx';
import { ConditionFailed } from '../../shared/errors';
import { signup } from '../../shared/orgs';
import { readBalance } from '../../shared/ledger/balance';
import { addApprovalCharges, approvalAllowed } from '../../shared/ledger/escrow';
import { getJobItem } from '../../shared/jobs';
import { newId } from '../../shared/ids';
import { nowIso } from '../../shared/clock';
import { fileItem } from '../../shared/files';
import type { JobItem } from '../../shared/jobs/model';
import type { SubmissionItem } from '../../shared/work/model';
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

/**
 * The S3 emulator and the CDN signing settings for domain steps that touch the bucket or sign a
 * download URL (an override deletes the withdrawn objects and answers with `file_url`). Returns
 * the stop function.
 */
export async function useS3Emulator(): Promise<() => Promise<void>> {
  const dir = mkdtempSync(path.join(tmpdir(), 'ledger-s3-'));
  const s3 = await startS3Emulator({ directory: dir, bucket: 'ledger-media', account: '000000000000', region: 'us-east-1', onObjectCreated: () => undefined });
  const secrets = ensureLocalSecrets(dir);
  Object.assign(process.env, {
    S3_ENDPOINT: s3.endpoint,
    BUCKET_NAME: s3.bucket,
    LOCAL_SECRETS_FILE: secrets.file,
    CDN_BASE_URL: 'http://127.0.0.1:9/cdn',
    CDN_KEY_PAIR_ID: secrets.values['cdn-key-pair-id'],
  });
  resetConfig();
  resetS3();
  return async () => {
    await s3.stop();
    rmSync(dir, { recursive: true, force: true });
  };
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
    heldFromRows: -sum('escrow') - sum('refund') + sum('deduction') + sum('reversal'),
    lotsRemaining: bal.lots.reduce((s, l) => s + l.remaining, 0),
    escrowOnJobs: jobs.reduce((s, j) => s + Number(j?.escrow_remaining_cents ?? 0), 0),
    negativeLots: bal.lots.filter((l) => l.remaining < 0).length,
    rows,
  };
}

/**
 * A scored submission item as the pipeline leaves it (D71 overrides read it): `files` uploads with
 * their parts, scored now, in `status`.
 */
export function submissionItem(job: JobItem, submissionId: string, files: number, status: 'approved' | 'rejected', extra: Record<string, unknown> = {}): SubmissionItem & Key {
  const uploads = Array.from({ length: files }, () => {
    const fileId = newId('file');
    return { file_id: fileId, key: objectKeys.upload(submissionId, 'r1', fileId, 'image/jpeg'), filename: 'p.jpg', content_type: 'image/jpeg', size_bytes: 100, mode: 'direct' as const };
  });
  const stars = status === 'approved' ? 4 : 1;
  return {
    ...keys.submission(submissionId),
    entity: 'submission',
    id: submissionId,
    job_id: job.id,
    worker_id: 'wkr_01PROPERTYTESTWORKER00000',
    org_id: job.org_id,
    environment: job.environment,
    status,
    attempt: 1,
    files_expected: files,
    slots_held: files,
    reserved_until: null,
    round: 'r1',
    uploads,
    device: {},
    parts: Object.fromEntries(
      uploads.map((u) => [
        u.file_id,
        {
          metadata: { content_type: 'image/jpeg', size_bytes: 100, content_hash: `sha256:${randomBytes(32).toString('hex')}` },
          score: { ai_star_rating: stars, dimensions: { relevance: stars, quality: stars, instruction_compliance: stars }, ai_reasoning: 'fixture', provider: 'local' },
          annotations: { type: 'image', annotation_model: 'fixture' },
        },
      ]),
    ),
    category: 'image',
    ai_star_rating: stars,
    ai_reasoning: 'fixture',
    dimensions: null,
    file_ids: status === 'approved' ? uploads.map((u) => u.file_id) : [],
    submitted_at: nowIso(),
    scored_at: nowIso(),
    created_at: nowIso(),
    ...extra,
  } as unknown as SubmissionItem & Key;
}

/**
 * A rejected submission (no charge, no slot held), as a pre-check rejection leaves it: its bytes
 * stay in the bucket for the override window (an override approval delivers them).
 */
export async function reject(jobId: string, submissionId: string, files: number): Promise<void> {
  const job = (await getJobItem(jobId))!;
  const sub = submissionItem(job, submissionId, files, 'rejected');
  await Promise.all(sub.uploads.map((u) => putObject(u.key, Buffer.from('fixture bytes'), u.content_type)));
  const tx = new Tx();
  tx.put('submission', sub);
  await tx.commit();
}

/**
 * Approve `files` of a job the way the pipeline does: read the job, check `approvalAllowed`, add
 * `addApprovalCharges` to a real Tx with the submission, its Files and the worker payout, commit;
 * on a lost race re-read and decide again. Returns false when the approval is refused (no charge, D29).
 */
export async function approve(jobId: string, submissionId: string, files: number): Promise<boolean> {
  for (let attempt = 0; attempt < 30; attempt++) {
    const job = (await getJobItem(jobId))!;
    if (!approvalAllowed(job, files)) return false;
    const tx = new Tx();
    const payId = newId('payout');
    const sub = submissionItem(job, submissionId, files, 'approved', { payout_id: payId, payout_cents: Number(job.worker_payout_per_file_cents) * files });
    tx.put('submission', sub);
    for (const u of sub.uploads) tx.put(`file:${u.file_id}`, fileItem(sub, u, sub.parts[u.file_id]!, 4, nowIso()));
    tx.put('payout', { ...keys.workerPayout(sub.worker_id, payId), entity: 'worker_payout', id: payId, submission_id: sub.id, amount_cents: sub.payout_cents, status: 'pending' });
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
  await indexesCaughtUp(); // read from an index: every event written so far, none missed for its lag
  const ix = indexKeys.tenantEvents(p.orgId, p.env);
  const out = await db().send(
    new QueryCommand({ TableName: tableName(), IndexName: ix.index, KeyConditionExpression: 'GSI1PK = :pk', ExpressionAttributeValues: { ':pk': ix.pk } }),
  );
  return (out.Items ?? []).map((e) => e.type as string);
}
