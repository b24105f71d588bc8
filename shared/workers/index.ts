/** Worker accounts (D9): signup returns a `svc_wkr_` token, stored hashed like API keys. */
import { keys } from '../db/keys';
import { Tx } from '../db/tx';
import { newId } from '../ids';
import { nowIso } from '../clock';
import { errors, ConditionFailed } from '../errors';
import { newWorkerToken, sha256hex } from '../auth/secrets';
import { recordResponse, type MutationContext } from '../context';
import type { Env } from '../types';

export async function signupWorker(ctx: MutationContext, input: { name: string; email: string }, env: Env = 'live') {
  const id = newId('worker');
  const token = newWorkerToken();
  const createdAt = nowIso();
  const email = input.email.trim().toLowerCase();
  const tx = new Tx();
  tx.create('worker', {
    ...keys.worker(id),
    entity: 'worker',
    id,
    name: input.name,
    email,
    environment: env,
    created_at: createdAt,
  });
  tx.create('email', { ...keys.workerEmail(email), entity: 'worker_email', worker_id: id });
  tx.create('secret', {
    ...keys.secret(sha256hex(token)),
    entity: 'secret',
    principal: 'worker',
    worker_id: id,
    environment: env,
  });
  const body = { object: 'worker_signup' as const, worker: { id, name: input.name, created_at: createdAt }, token };
  recordResponse(ctx, tx, body, 201);
  try {
    await tx.commit();
  } catch (e) {
    if (e instanceof ConditionFailed && e.reasons.includes('email')) {
      throw errors.conflict('A worker with this e-mail already exists.', [
        { field: 'email', message: 'already registered', code: 'email_taken' },
      ]);
    }
    throw e;
  }
  return body;
}
