/**
 * Jobs: create with escrow (D14-D19, D31), list (D12, D21), get with long-poll (D20, D46, D57),
 * cancel exactly once (spec cancel rules 1-6), rate (D22). Every state change writes its event
 * (D35) and audit record (D39) in its own transaction, with the idempotent response (D11).
 */
import { BatchGetCommand, GetCommand } from '@aws-sdk/lib-dynamodb';
import { db, tableName } from '../db/client';
import { keys, indexKeys } from '../db/keys';
import { Tx } from '../db/tx';
import { queryPage, listBody } from '../db/query';
import { binding } from '../cursor';
import { idsAt, ulidFloor } from '../ids';
import { now, nowIso } from '../clock';
import { config } from '../config';
import { emit } from '../outbox';
import { audit } from '../audit';
import { ApiError, ConditionFailed, errors } from '../errors';
import { isContention } from '../db/tx';
import { mayRebuildAfterContention, mayRebuildStale } from '../db/conflicts';
import { recordResponse, type MutationContext } from '../context';
import { balanceSnapshot, readBalance, readLots, dropRegime, emitLowBalance, spendableAt } from '../ledger/balance';
import { getSettings, settingsFromItems } from '../orgs';
import { addEscrow, addEscrowRefund, insufficientCredits } from '../ledger/escrow';
import { ACTIVE_STATUSES, availability, emptySummary, jobIndex, type JobItem, type JobStatus } from './model';
import { checkCombinations, checkPrice, money, normalise } from './validation';
import type { CreateJobInput } from './create-body';
import { presentJob, presentSummary } from './view';
import type { BuyerPrincipal, TenantReads } from '../types';

export { presentJob, presentSummary };

const MAX_ATTEMPTS = 20;
const backoff = (attempt: number) => new Promise((r) => setTimeout(r, Math.random() * Math.min(400, 10 * 2 ** attempt)));
/**
 * A failed condition on money items means our snapshot went stale: re-read and retry. Contention
 * (conflicts that outlasted Tx.commit's own bounded retries) is retried on a fresh read only while
 * the rebuild budget lasts (`mayRebuildAfterContention`), as job-bound writes do: a burst of
 * creations on one balance can outlast one commit's budget on a loaded machine (6 of 20 answered
 * 409 in a CI run), yet the request still answers 409 with Retry-After well inside the gateway's
 * time limit when contention lasts. A stale snapshot is rebuilt at most MAX_ATTEMPTS times and
 * within the stale budget (`mayRebuildStale`), since a stale round may first have waited out a
 * commit's contention budget.
 */
const isStale = (e: unknown) => e instanceof ConditionFailed && e.reasons.some((r) => r === 'balance' || r?.startsWith('lot:'));

/**
 * What a live creation reads before its transaction: the organization (D18 free tier), its settings
 * (D34 threshold) and the balance in one strongly consistent BatchGetItem, beside the lots Query.
 * Later attempts (a stale snapshot) re-read only the balance and lots.
 */
async function readForCreate(p: BuyerPrincipal, pre?: TenantReads) {
  if (pre?.lots && 'settings' in pre) {
    // Read beside the rate-limit decision (the route's `reads`): nothing to read again.
    return { purchased: pre.org?.has_purchased === true, settings: settingsFromItems(p.orgId, pre.settings, pre.org), snap: balanceSnapshot(pre.balance, pre.lots) };
  }
  const want = [keys.organization(p.orgId), keys.settings(p.orgId), keys.balance(p.orgId, p.env)];
  const [out, lots] = await Promise.all([
    db().send(new BatchGetCommand({ RequestItems: { [tableName()]: { Keys: want, ConsistentRead: true } } })),
    readLots(p.orgId, p.env),
  ]);
  if (out.UnprocessedKeys?.[tableName()]?.Keys?.length) {
    // DynamoDB may leave keys of a batch unread under load: read them one by one instead.
    const [org, settings, snap] = await Promise.all([
      db().send(new GetCommand({ TableName: tableName(), Key: want[0], ConsistentRead: true })),
      getSettings(p.orgId),
      readBalance(p.orgId, p.env),
    ]);
    return { purchased: org.Item?.has_purchased === true, settings, snap };
  }
  const items = out.Responses?.[tableName()] ?? [];
  const [org, settings, balance] = want.map((k) => items.find((i) => i.PK === k.PK && i.SK === k.SK));
  return { purchased: org?.has_purchased === true, settings: settingsFromItems(p.orgId, settings, org), snap: balanceSnapshot(balance, lots) };
}

const freeTierLimit = () =>
  new ApiError(403, 'free_tier_job_limit', 'A free-tier organization can have one active job at a time; buy credits to post more.');

export async function createJob(ctx: MutationContext, p: BuyerPrincipal, input: CreateJobInput, pre?: TenantReads) {
  const f = normalise(input);
  checkCombinations(f); // 422 (D4)
  checkPrice(f); // 400 pricing_violation (D14)
  const m = money(f.price_per_file_cents, f.files_needed);
  const live = p.env === 'live';
  const first = live ? await readForCreate(p, pre) : null;
  const freeTier = live && !first!.purchased; // D18: the test environment is exempt
  const settings = first?.settings;
  const since = Date.now();

  for (let attempt = 0; ; attempt++) {
    // Each try has its own id, carrying its created_at (D1: ids sort by creation time), so a
    // creation that commits on a later try lists where its created_at says.
    const atDate = now();
    const at = atDate.toISOString();
    const jobId = idsAt('job', atDate)();
    const tx = new Tx();
    const base = {
      id: jobId,
      org_id: p.orgId,
      environment: p.env,
      status: 'open' as JobStatus,
      files_approved: 0,
      files_pending: 0,
      slots_reserved: 0,
      worker_payout_per_file_cents: m.worker_payout_per_file_cents,
    };
    let escrowSources: JobItem['escrow_sources'] = [];
    if (live) {
      const snap = attempt === 0 ? first!.snap : await readBalance(p.orgId, p.env);
      if (freeTier && snap.activeJobs > 0) throw freeTierLimit(); // D57: before 402
      // D33: only credits not yet expired count, even before the sweep takes the others out of the balance.
      const { spendable, expired } = spendableAt(snap, at);
      if (spendable < m.total_cost_cents) {
        throw insufficientCredits(spendable, m.total_cost_cents, `${config().publicBaseUrl}/v1/billing/credits/purchase`, Math.min(expired, snap.available - spendable));
      }
      const regime = dropRegime(snap.available, m.total_cost_cents, settings!.auto_top_up_threshold_cents);
      try {
        escrowSources = addEscrow(tx, { orgId: p.orgId, env: p.env, jobId, amount: m.total_cost_cents, snapshot: snap, freeTier, balanceCondition: regime, at });
      } catch (e) {
        // The balance and the lots were read on either side of a concurrent grant: read again.
        if (isStale(e) && attempt < MAX_ATTEMPTS && mayRebuildStale(since)) {
          await backoff(attempt);
          continue;
        }
        if (isStale(e)) throw errors.conflict('The balance changed under heavy concurrency; retry the request.', undefined, { 'Retry-After': '1' });
        throw e;
      }
      // D34: the event also queues the auto top-up, when enabled (stream rule auto-top-up).
      if (regime.crossing) emitLowBalance(tx, p.orgId, p.env, snap.available - m.total_cost_cents, settings!);
    }
    const item = {
      ...keys.job(jobId),
      ...jobIndex(base, 'open'),
      ...availability(base as JobItem, 'open', f.files_needed),
      entity: 'job',
      ...base,
      ...f,
      ...m,
      escrow_remaining_cents: live ? m.total_cost_cents : 0,
      escrow_sources: escrowSources,
      summary: emptySummary(),
      created_at: at,
      updated_at: at,
      completed_at: null,
      cancelled_at: null,
    };
    tx.create('job', item);
    const view = presentJob(item);
    emit(tx, { orgId: p.orgId, env: p.env, type: 'job.created', jobId, data: { job_id: jobId, ...view } });
    audit(tx, {
      orgId: p.orgId,
      eventType: 'job.created',
      actor: ctx.actor,
      env: p.env,
      resource: { type: 'job', id: jobId },
      jobId,
      requestId: ctx.requestId,
      data: { escrow_cents: live ? m.total_cost_cents : 0, files_needed: f.files_needed, price_per_file_cents: f.price_per_file_cents },
    });
    recordResponse(ctx, tx, view, 201);
    try {
      await tx.commit();
    } catch (e) {
      if (((isStale(e) && mayRebuildStale(since)) || (isContention(e) && mayRebuildAfterContention(since))) && attempt < MAX_ATTEMPTS) {
        await backoff(attempt);
        continue;
      }
      if (isStale(e)) throw errors.conflict('The balance changed under heavy concurrency; retry the request.', undefined, { 'Retry-After': '1' });
      throw e;
    }
    return view;
  }
}

export async function getJobItem(jobId: string, consistent = true): Promise<JobItem | undefined> {
  const out = await db().send(new GetCommand({ TableName: tableName(), Key: keys.job(jobId), ConsistentRead: consistent }));
  return out.Item as JobItem | undefined;
}

export function jobWithSummary(item: Record<string, unknown>) {
  return { ...presentJob(item), submission_summary: presentSummary(item) };
}

export async function listJobs(
  p: BuyerPrincipal,
  q: { status?: JobStatus; type?: string; created_after?: string; limit: number; cursor?: string },
) {
  const ix = q.status ? indexKeys.tenantJobsByStatus(p.orgId, p.env, q.status) : indexKeys.tenantJobs(p.orgId, p.env);
  const page = await queryPage<Record<string, unknown>>({
    index: ix.index,
    pk: ix.pk,
    limit: q.limit,
    cursor: q.cursor,
    ...(q.created_after ? { skAfter: ulidFloor('job', new Date(q.created_after), 'Z') } : {}),
    ...(q.type ? { filter: { expression: '#ty = :ty', names: { '#ty': 'type' }, values: { ':ty': q.type } } } : {}),
    binding: binding({ what: 'jobs', org: p.orgId, env: p.env, status: q.status, type: q.type, created_after: q.created_after }),
  });
  return listBody(page.items.map(presentJob), page);
}

export async function cancelJob(ctx: MutationContext, p: BuyerPrincipal, first: JobItem) {
  let job = first;
  const since = Date.now();
  for (let attempt = 0; ; attempt++) {
    if (!ACTIVE_STATUSES.includes(job.status)) {
      throw errors.conflict(`The job is ${job.status} and cannot be cancelled.`, [{ field: 'status', message: `job is ${job.status}`, code: `job_${job.status}` }]);
    }
    const at = nowIso();
    const tx = new Tx();
    const refund = addEscrowRefund(tx, job);
    tx.update(
      'job',
      keys.job(job.id),
      'SET #s = :c, cancelled_at = :t, updated_at = :t, GSI2PK = :g2, escrow_remaining_cents = :zero REMOVE GSI3PK, GSI3SK',
      {
        // Exactly once (cancel rule 2): only from an active status, and only on the escrow and the
        // approvals we read (a test job's escrow is 0 throughout, so only its count shows an
        // approval that committed meanwhile, and job.cancelled reports the count it ends with).
        condition: '#s IN (:a1, :a2, :a3) AND escrow_remaining_cents = :er AND files_approved = :fa',
        names: { '#s': 'status' },
        values: {
          ':c': 'cancelled',
          ':t': at,
          ':g2': jobIndex(job, 'cancelled').GSI2PK,
          ':zero': 0,
          ':a1': ACTIVE_STATUSES[0],
          ':a2': ACTIVE_STATUSES[1],
          ':a3': ACTIVE_STATUSES[2],
          ':er': Number(job.escrow_remaining_cents ?? 0),
          ':fa': Number(job.files_approved),
        },
      },
    );
    const data = { job_id: job.id, files_approved: Number(job.files_approved), files_needed: Number(job.files_needed), refund_cents: refund };
    emit(tx, { orgId: job.org_id, env: job.environment, type: 'job.cancelled', jobId: job.id, data });
    audit(tx, {
      orgId: job.org_id,
      eventType: 'job.cancelled',
      actor: ctx.actor,
      env: job.environment,
      resource: { type: 'job', id: job.id },
      jobId: job.id,
      requestId: ctx.requestId,
      data: { refund_cents: refund },
    });
    const view = presentJob({ ...job, status: 'cancelled', cancelled_at: at, updated_at: at, escrow_remaining_cents: 0 });
    recordResponse(ctx, tx, view);
    try {
      await tx.commit();
      return view;
    } catch (e) {
      if (!(e instanceof ConditionFailed) || attempt >= MAX_ATTEMPTS || !mayRebuildStale(since)) throw e;
      job = (await getJobItem(job.id))!; // lost a race: an approval, or another cancel (then 409)
      await backoff(attempt);
    }
  }
}

export async function rateJob(ctx: MutationContext, p: BuyerPrincipal, job: JobItem, input: { rating: number; feedback?: string }) {
  const notRatable = () => errors.conflict(job.status !== 'completed' ? `Only a completed job can be rated; this job is ${job.status}.` : 'This job has already been rated.');
  if (job.status !== 'completed' || (job.buyer_rating !== undefined && job.buyer_rating !== null)) throw notRatable(); // D22
  const at = nowIso();
  const tx = new Tx();
  tx.update('job', keys.job(job.id), 'SET buyer_rating = :r, buyer_feedback = :f, rated_at = :t, updated_at = :t', {
    condition: '#s = :done AND attribute_not_exists(buyer_rating)',
    names: { '#s': 'status' },
    values: { ':r': input.rating, ':f': input.feedback ?? null, ':t': at, ':done': 'completed' },
  });
  audit(tx, {
    orgId: job.org_id,
    eventType: 'job.rated',
    actor: ctx.actor,
    env: job.environment,
    resource: { type: 'job', id: job.id },
    jobId: job.id,
    requestId: ctx.requestId,
    data: { rating: input.rating },
  });
  const view = presentJob({ ...job, buyer_rating: input.rating, buyer_feedback: input.feedback ?? null });
  recordResponse(ctx, tx, view);
  try {
    await tx.commit();
  } catch (e) {
    if (e instanceof ConditionFailed) throw errors.conflict('This job has already been rated.');
    throw e;
  }
  return view;
}
