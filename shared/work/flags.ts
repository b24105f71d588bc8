/**
 * A worker flags a job as unreasonable (spec worker routes; D35 `job.flagged {job_id, reason,
 * flag_count}`), once per worker per job (`keys.jobFlag`, access pattern 19). The job keeps a
 * `flag_count`; the flag, the count, the event and the audit record are one transaction.
 */
import { keys } from '../db/keys';
import { Tx } from '../db/tx';
import { nowIso } from '../clock';
import { emit } from '../outbox';
import { audit } from '../audit';
import { ConditionFailed, errors } from '../errors';
import { mayRebuildStale } from '../db/conflicts';
import { recordResponse, type MutationContext } from '../context';
import { getJobItem } from '../jobs';
import { ACTIVE_STATUSES } from '../jobs/model';
import type { WorkerPrincipal } from '../types';

export async function flagJob(ctx: MutationContext, worker: WorkerPrincipal, jobId: string, reason: string) {
  const since = Date.now();
  for (let attempt = 0; attempt < 20; attempt++) {
    const job = (await getJobItem(jobId, true))!;
    // Only a job still taking work can be flagged: a closed one is nothing a worker can take up.
    if (!ACTIVE_STATUSES.includes(job.status)) {
      throw errors.conflict(`The job is ${job.status}; only a job taking submissions can be flagged.`, [{ field: 'job_id', message: `job is ${job.status}`, code: `job_${job.status}` }]);
    }
    const count = Number(job.flag_count ?? 0);
    const at = nowIso();
    const tx = new Tx();
    tx.create('flag', { ...keys.jobFlag(jobId, worker.workerId), entity: 'job_flag', job_id: jobId, worker_id: worker.workerId, reason, created_at: at });
    // Only flag_count is conditioned: slot changes on the job never conflict with a flag.
    tx.update('job', keys.job(jobId), 'SET flag_count = :n', {
      condition: count === 0 ? 'attribute_not_exists(flag_count) OR flag_count = :z' : 'flag_count = :c',
      values: count === 0 ? { ':n': 1, ':z': 0 } : { ':n': count + 1, ':c': count },
    });
    const data = { job_id: jobId, reason, flag_count: count + 1 };
    emit(tx, { orgId: job.org_id, env: job.environment, type: 'job.flagged', jobId, data });
    audit(tx, {
      orgId: job.org_id,
      eventType: 'job.flagged',
      actor: ctx.actor,
      env: job.environment,
      resource: { type: 'job', id: jobId },
      jobId,
      requestId: ctx.requestId,
      data: { reason, flag_count: count + 1 },
    });
    const body = { object: 'job_flag' as const, job_id: jobId, worker_id: worker.workerId, reason, flag_count: count + 1, created_at: at };
    recordResponse(ctx, tx, body);
    try {
      await tx.commit();
      return body;
    } catch (e) {
      if (e instanceof ConditionFailed && e.reasons.includes('flag')) {
        throw errors.conflict('You have already flagged this job.', [{ field: 'job_id', message: 'already flagged', code: 'already_flagged' }]);
      }
      // Another flag moved the count: read again, within the stale budget (a round may first have
      // waited out a contended commit), else answer 409 below.
      if (e instanceof ConditionFailed && e.reasons.includes('job') && mayRebuildStale(since)) continue;
      if (e instanceof ConditionFailed && e.reasons.includes('job')) break;
      throw e;
    }
  }
  throw errors.conflict('The job changed while flagging; retry.', undefined, { 'Retry-After': '1' });
}
