/**
 * D64: after a killed run, the start-up reconcilers put back on the queues what the table says is
 * unfinished, and nothing else: an event never fanned out gets its stream record again, a pending
 * delivery its attempt message under the token it holds, a finished event with a stale aggregate
 * is repaired; an unfinished sandbox run gets its next tick; an export not yet built goes back to
 * the builder; a withdrawal whose objects are not deleted goes back to the deleter; a crossing whose
 * auto top-up is not applied goes back to the top-ups queue; a recent cancellation goes back to
 * the consumer that ends its submissions. (The whole path, with the pipeline,
 * is test/local/stop-and-restart.test.ts.)
 */
import { PutCommand, UpdateCommand } from '@aws-sdk/lib-dynamodb';
import { db, tableName } from '../../shared/db/client';
import { keys } from '../../shared/db/keys';
import { Tx } from '../../shared/db/tx';
import { emit } from '../../shared/outbox';
import { getEvent, newEntry } from '../../shared/webhooks/dispatcher';
import { cancellationsReconciler, exportsReconciler, sandboxReconciler, topUpsReconciler, uploadsReconciler, webhooksReconciler, withdrawalsReconciler } from '../../local/reconcile-unfinished';
import { putObject } from '../../shared/storage/s3';
import { cancelledJobOf } from '../../shared/work/cancelled-job';
import { clock } from '../../shared/clock';
import { topUpSessionId } from '../../shared/billing/auto-top-up';
import { silentLog } from '../../local/log';
import type { ReconcileContext } from '../../local/reconcilers';
import { startTestRuntime, type TestRuntime } from '../support/harness';
import { idemKey, signupBuyer } from '../support/buyers';

let rt: TestRuntime;
beforeAll(async () => {
  rt = await startTestRuntime({ enablePollers: false, enableStreams: false });
});
afterAll(async () => {
  await rt?.stop();
});

function context(): ReconcileContext & { sent: { queue: string; body: any }[]; routed: any[] } {
  const sent: { queue: string; body: any }[] = [];
  const routed: any[] = [];
  return {
    sent,
    routed,
    send: async (queue, body) => void sent.push({ queue, body: JSON.parse(body) }),
    route: async (event) => (routed.push(event), []),
    bucketName: rt.bucketName,
    account: '000000000000',
    region: 'us-east-1',
    log: silentLog,
  };
}

async function newEvent(orgId: string, type: 'job.completed' | 'job.created' = 'job.completed', env: 'live' | 'test' = 'live', jobId?: string) {
  const tx = new Tx();
  const id = emit(tx, { orgId, env, type, data: { job_id: jobId ?? 'job_x' }, jobId: jobId ?? null }).id;
  await tx.commit();
  return id;
}

const setDeliveries = (id: string, deliveries: Record<string, unknown>, status = 'pending') =>
  db().send(
    new UpdateCommand({
      TableName: tableName(),
      Key: keys.event(id),
      UpdateExpression: 'SET deliveries = :d, delivery_status = :s, dv = :dv',
      ExpressionAttributeValues: { ':d': deliveries, ':s': status, ':dv': 5 },
    }),
  );

it('unfinished events go back to the webhooks queue, each in the form that resumes it; finished ones do not', async () => {
  const org = `org_rec${Date.now()}`;
  const never = await newEvent(org);
  const retrying = await newEvent(org);
  const due = new Date(Date.now() + 60_000).toISOString();
  await setDeliveries(retrying, {
    we_ok: { ...newEntry(new Date()), status: 'delivered', attempts: 1, next_token: null },
    // After two attempts (each records its place in the retry schedule).
    we_retry: { ...newEntry(new Date(due), 'tok-1'), attempts: 2, retry_index: 2 },
  });
  const stale = await newEvent(org);
  await setDeliveries(stale, { we_ok: { ...newEntry(new Date()), status: 'delivered', attempts: 1, next_token: null } });
  const done = await newEvent(org);
  await setDeliveries(done, { we_ok: { ...newEntry(new Date()), status: 'delivered', attempts: 1, next_token: null } }, 'delivered');

  const ctx = context();
  await webhooksReconciler.run(ctx);
  const mine = ctx.sent.filter((m) => JSON.stringify(m.body).includes(org));
  expect(mine.every((m) => m.queue === 'webhooks')).toBe(true);
  const fanOuts = mine.filter((m) => m.body.eventName === 'INSERT').map((m) => m.body.dynamodb.NewImage.id.S);
  expect(fanOuts).toEqual([never]);
  const attempts = mine.filter((m) => m.body.kind === 'webhook.attempt');
  expect(attempts).toEqual([
    {
      queue: 'webhooks',
      body: expect.objectContaining({ event_id: retrying, endpoint_id: 'we_retry', token: 'tok-1', expect_attempts: 2, retry_index: 2, due_at: due, replay: false }),
    },
  ]);
  expect((await getEvent(stale))!.delivery_status).toBe('delivered'); // the aggregate, repaired
});

it('D64: an event killed between its empty deliveries map and their entries is fanned out again, never marked delivered', async () => {
  const org = `org_rec${Date.now()}`;
  const ev = await newEvent(org);
  await db().send(new UpdateCommand({ TableName: tableName(), Key: keys.event(ev), UpdateExpression: 'SET deliveries = :empty', ExpressionAttributeValues: { ':empty': {} } }));
  const ctx = context();
  await webhooksReconciler.run(ctx);
  const fanOuts = ctx.sent.filter((m) => m.body.eventName === 'INSERT' && m.body.dynamodb.NewImage.id.S === ev);
  expect(fanOuts).toHaveLength(1);
  expect((await getEvent(ev))!.delivery_status).toBe('pending');
});

it('D64: a fan-out killed between its writes of 50 entries is fanned out again, to create the entries still missing; the claimed ones go back as attempts', async () => {
  const org = `org_rec${Date.now()}`;
  const ev = await newEvent(org);
  await setDeliveries(ev, { we_first: { ...newEntry(new Date(), 'tok-fan') } });
  const ctx = context();
  await webhooksReconciler.run(ctx);
  const mine = ctx.sent.filter((m) => JSON.stringify(m.body).includes(ev));
  expect(mine.filter((m) => m.body.eventName === 'INSERT')).toHaveLength(1);
  expect(mine.filter((m) => m.body.kind === 'webhook.attempt').map((m) => [m.body.endpoint_id, m.body.token])).toEqual([['we_first', 'tok-fan']]);
});

it('a pending delivery goes back at its place in the retry schedule: the one a replay kept, or its attempts for an entry written before places were recorded', async () => {
  const org = `org_rec${Date.now()}`;
  const ev = await newEvent(org);
  const { retry_index: _unrecorded, ...older } = { ...newEntry(new Date(), 'tok-old'), attempts: 3 };
  await setDeliveries(ev, {
    // Three attempts, then a replay that kept the schedule at its second retry.
    we_replayed: { ...newEntry(new Date(), 'tok-replayed'), attempts: 3, retry_index: 1, next_replay: true },
    we_older: older,
  });
  const ctx = context();
  await webhooksReconciler.run(ctx);
  const byEndpoint = Object.fromEntries(ctx.sent.filter((m) => m.body.kind === 'webhook.attempt' && m.body.event_id === ev).map((m) => [m.body.endpoint_id, m.body.retry_index]));
  expect(byEndpoint).toEqual({ we_replayed: 1, we_older: 3 });
});

it('D37: a pending replay goes back as a replay: of a finished delivery, one attempt with no retries; of one being retried, keeping the retries it took over', async () => {
  const ev = await newEvent(`org_rec${Date.now()}`);
  await setDeliveries(ev, {
    we_finished: { ...newEntry(new Date(), 'tok-f'), attempts: 8, retry_index: null, next_replay: true },
    we_retrying: { ...newEntry(new Date(), 'tok-r'), attempts: 2, retry_index: 2, next_replay: true },
    we_plain: { ...newEntry(new Date(), 'tok-p'), attempts: 2, retry_index: 2 },
  });
  const ctx = context();
  await webhooksReconciler.run(ctx);
  const sent = Object.fromEntries(ctx.sent.filter((m) => m.body.kind === 'webhook.attempt' && m.body.event_id === ev).map((m) => [m.body.endpoint_id, m.body]));
  expect(sent.we_finished).toMatchObject({ replay: true, retry_index: 0 });
  expect(sent.we_finished.keep_retries).toBeUndefined();
  expect(sent.we_retrying).toMatchObject({ replay: true, keep_retries: true, retry_index: 2 });
  expect(sent.we_plain).toMatchObject({ replay: false, retry_index: 2 });
  expect(sent.we_plain.keep_retries).toBeUndefined();
});

it('D37: the replay route marks its deliveries as replays, so a start-up re-enqueues a replay of a finished delivery as one attempt', async () => {
  const b = await signupBuyer(rt, 'Replay restart');
  const ep = await rt.request('POST', '/v1/webhook_endpoints', { key: b.live, body: { url: 'http://127.0.0.1:9/hook', events: ['*'] }, headers: { 'Idempotency-Key': idemKey() } });
  expect(ep.status).toBe(201);
  const ev = await newEvent(b.orgId);
  await setDeliveries(ev, { [ep.json.id]: { ...newEntry(new Date()), status: 'delivered', attempts: 1, next_token: null } }, 'delivered');
  expect((await rt.request('POST', `/v1/webhook_events/${ev}/replay`, { key: b.live, body: {}, headers: { 'Idempotency-Key': idemKey() } })).status).toBe(202);
  const ctx = context();
  await webhooksReconciler.run(ctx);
  const msg = ctx.sent.find((m) => m.body.kind === 'webhook.attempt' && m.body.event_id === ev);
  expect(msg?.body).toMatchObject({ replay: true, retry_index: 0, expect_attempts: 1 });
  expect(msg?.body.keep_retries).toBeUndefined();
});

it('an unfinished sandbox run gets its next tick; a test job whose run never started gets its job.created again', async () => {
  const running = `job_recrun${Date.now()}`;
  await db().send(new PutCommand({ TableName: tableName(), Item: { ...keys.sandboxState(running), entity: 'sandbox_state', job_id: running, seq: 3, finished: null } }));
  const finished = `job_recfin${Date.now()}`;
  await db().send(new PutCommand({ TableName: tableName(), Item: { ...keys.sandboxState(finished), entity: 'sandbox_state', job_id: finished, seq: 9, finished: 'completed' } }));
  const notStarted = `job_recnew${Date.now()}`;
  const created = await newEvent(`org_rec${Date.now()}`, 'job.created', 'test', notStarted);

  const ctx = context();
  await sandboxReconciler.run(ctx);
  expect(ctx.sent.filter((m) => m.body.kind === 'sandbox.tick' && [running, finished].includes(m.body.job_id))).toEqual([
    { queue: 'sandbox', body: { kind: 'sandbox.tick', job_id: running, seq: 3 } },
  ]);
  const starts = ctx.sent.filter((m) => m.body.eventName === 'INSERT');
  expect(starts.map((m) => [m.queue, m.body.dynamodb.NewImage.id.S])).toContainEqual(['sandbox', created]);
});

it('an export still pending or running goes back to the builder as its INSERT record; a finished one does not', async () => {
  const put = async (status: string) => {
    const id = `exp_rec${status}${Date.now()}`;
    await db().send(new PutCommand({ TableName: tableName(), Item: { ...keys.export(id), entity: 'export', id, status, attempts: status === 'pending' ? 0 : 1 } }));
    return id;
  };
  const [pending, running, succeeded, failed] = [await put('pending'), await put('running'), await put('succeeded'), await put('failed')];

  const ctx = context();
  await exportsReconciler.run(ctx);
  const sent = ctx.sent.filter((m) => [pending, running, succeeded, failed].includes(m.body.dynamodb?.NewImage?.id?.S));
  expect(sent.map((m) => [m.queue, m.body.eventName, m.body.dynamodb.NewImage.id.S]).sort()).toEqual(
    [
      ['exports', 'INSERT', pending],
      ['exports', 'INSERT', running],
    ].sort(),
  );
});

it('an override that withdrew Files whose objects are not recorded as deleted goes back to the deleter as its event\'s INSERT record (D71)', async () => {
  const org = `org_wd${Date.now()}`;
  const override = async (tag: string, decision: 'reject' | 'approve', sub: Record<string, unknown>) => {
    const id = `sub_wd${tag}${Date.now()}`;
    await db().send(new PutCommand({ TableName: tableName(), Item: { ...keys.submission(id), entity: 'submission', id, ...sub } }));
    const tx = new Tx();
    emit(tx, { orgId: org, env: 'live', type: 'submission.overridden', data: { submission_id: id, decision }, jobId: 'job_x' });
    await tx.commit();
    return id;
  };
  const undeleted = await override('a', 'reject', { withdrawn_object_keys: ['uploads/a.jpg'] });
  const deleted = await override('b', 'reject', { withdrawn_object_keys: ['uploads/b.jpg'], withdrawn_objects_deleted_at: '2026-11-26T00:00:00Z' });
  const approved = await override('c', 'approve', {});

  const ctx = context();
  await withdrawalsReconciler.run(ctx);
  const sent = ctx.sent.filter((m) => [undeleted, deleted, approved].includes(m.body.dynamodb?.NewImage?.envelope?.M?.data?.M?.submission_id?.S));
  expect(sent.map((m) => [m.queue, m.body.eventName, m.body.dynamodb.NewImage.envelope.M.data.M.submission_id.S])).toEqual([['withdrawals', 'INSERT', undeleted]]);
});

it('a crossing with auto top-up on whose top-up is not applied goes back to the top-ups queue as its event\'s INSERT record (D34)', async () => {
  const org = `org_tu${Date.now()}`;
  const crossing = async (enabled: boolean, session?: string) => {
    const tx = new Tx();
    const id = emit(tx, { orgId: org, env: 'live', type: 'credits.low_balance', data: { balance_cents: 900, threshold_cents: 1000, auto_top_up_enabled: enabled } }).id;
    await tx.commit();
    if (session) await db().send(new PutCommand({ TableName: tableName(), Item: { ...keys.checkoutSession(topUpSessionId(id)), entity: 'checkout_session', status: session } }));
    return id;
  };
  const [unqueued, stopped, paid, declined, off] = [await crossing(true), await crossing(true, 'open'), await crossing(true, 'paid'), await crossing(true, 'failed'), await crossing(false)];

  const ctx = context();
  await topUpsReconciler.run(ctx);
  const sent = ctx.sent.filter((m) => [unqueued, stopped, paid, declined, off].includes(m.body.dynamodb?.NewImage?.id?.S));
  expect(sent.map((m) => [m.queue, m.body.eventName, m.body.dynamodb.NewImage.id.S]).sort()).toEqual(
    [
      ['top-ups', 'INSERT', unqueued],
      ['top-ups', 'INSERT', stopped],
    ].sort(),
  );
});

it('a job cancelled in the last two hours goes back to the cancellations queue as its event\'s INSERT record; an older one does not', async () => {
  const org = `org_cx${Date.now()}`;
  const cancelled = async (jobId: string) => {
    const tx = new Tx();
    const id = emit(tx, { orgId: org, env: 'live', type: 'job.cancelled', data: { job_id: jobId, files_approved: 0, files_needed: 1, refund_cents: 10 }, jobId }).id;
    await tx.commit();
    return id;
  };
  const recentJob = `job_recent${Date.now()}`;
  clock.advance(-3 * 3600_000);
  let old: string;
  try {
    old = await cancelled('job_old');
  } finally {
    clock.reset();
  }
  const recent = await cancelled(recentJob);

  const ctx = context();
  await cancellationsReconciler.run(ctx);
  const sent = ctx.sent.filter((m) => [old, recent].includes(m.body.dynamodb?.NewImage?.id?.S));
  expect(sent.map((m) => [m.queue, m.body.dynamodb.NewImage.id.S])).toEqual([['cancellations', recent]]);
  expect(cancelledJobOf(JSON.stringify(sent[0]!.body))).toBe(recentJob);
});

it('a cancellation made shortly before a killed run ended goes back however long the stop that followed (the window counts from that run)', async () => {
  const org = `org_cl${Date.now()}`;
  const jobId = `job_long${Date.now()}`;
  clock.advance(-30 * 3600_000); // cancelled 30 hours ago, in the run that was then killed
  let id: string;
  try {
    const tx = new Tx();
    id = emit(tx, { orgId: org, env: 'live', type: 'job.cancelled', data: { job_id: jobId, files_approved: 0, files_needed: 1, refund_cents: 10 }, jobId }).id;
    await tx.commit();
  } finally {
    clock.reset();
  }
  const mine = (c: ReturnType<typeof context>) => c.sent.filter((m) => m.body.dynamodb?.NewImage?.id?.S === id);
  const unknownStart = context();
  await cancellationsReconciler.run(unknownStart);
  expect(mine(unknownStart)).toEqual([]);
  const killed = { ...context(), killedRunStartedAt: new Date(Date.now() - 31 * 3600_000).toISOString() };
  await cancellationsReconciler.run(killed);
  expect(mine(killed).map((m) => m.queue)).toEqual(['cancellations']);
});

it('a retry whose files landed before the run was killed goes back to scoring; a retry_pending submission with no retry planned does not', async () => {
  const put = async (id: string, extra: Record<string, unknown>) => {
    const key = `uploads/${id}/r2/file_${id}.jpg`;
    await putObject(key, Buffer.from('jpeg bytes'), 'image/jpeg');
    await db().send(
      new PutCommand({
        TableName: tableName(),
        Item: { ...keys.submission(id), entity: 'submission', id, status: 'retry_pending', round: 'r2', attempt: 1, uploads: [{ file_id: `file_${id}`, key, content_type: 'image/jpeg', size_bytes: 10 }], ...extra },
      }),
    );
    return key;
  };
  const inFlight = await put(`sub_rf${Date.now()}`, { retry_round: 'r2' });
  const notPlanned = await put(`sub_rn${Date.now()}`, {});
  const ctx = context();
  await uploadsReconciler.run(ctx);
  const keysRouted = ctx.routed.map((e) => e.detail.object.key);
  expect(keysRouted).toContain(inFlight);
  expect(keysRouted).not.toContain(notPlanned);
});

it('after an unclean stop the run marker keeps the cut-short run\'s start, so a second failure still looks back from it', async () => {
  const { mkdtempSync, readFileSync, writeFileSync } = await import('node:fs');
  const { tmpdir } = await import('node:os');
  const { join } = await import('node:path');
  const { runMarker } = await import('../../local/reconcilers');
  const file = join(mkdtempSync(join(tmpdir(), 'marker-')), 'runtime.running');
  const fresh = runMarker(file);
  expect([fresh.uncleanBefore, fresh.startedAt]).toEqual([false, null]);
  writeFileSync(file, '4242 2026-01-01T00:00:00.000Z\n'); // a run killed long ago
  const next = runMarker(file);
  expect([next.uncleanBefore, next.startedAt]).toEqual([true, '2026-01-01T00:00:00.000Z']);
  expect(readFileSync(file, 'utf8')).toMatch(/ 2026-01-01T00:00:00\.000Z\n$/);
});
