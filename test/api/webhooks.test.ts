/**
 * Webhooks end to end on the local runtime (D36-D38, D44, D48): real handlers, DynamoDB Local,
 * the stream pipe, the SQS emulator's webhooks queue, the dispatcher, and a real receiver.
 * Events are produced by the real outbox (`emit` inside a Tx), as the jobs feature will.
 */
import { randomUUID, createHmac } from 'node:crypto';
import { Webhook } from 'standardwebhooks';
import { startTestRuntime, waitFor as waitUntilTruthy, type TestRuntime, indexesCaughtUp } from '../support/harness';
import type { WaitOptions } from '../../local/net';
import { startDevReceiver, type DevReceiver } from '../../shared/webhooks/dev-receiver';
import { verifyWebhook } from '../../shared/webhooks/verify';
import { Tx } from '../../shared/db/tx';
import { emit, type EventType } from '../../shared/outbox';
import { clock, DAY_MS, HOUR_MS } from '../../shared/clock';
import type { Env } from '../../shared/types';
import { getEvent } from '../../shared/webhooks/dispatcher';
import { presentEvent } from '../../shared/webhooks/events';
import { GetCommand, UpdateCommand } from '@aws-sdk/lib-dynamodb';
import { db, tableName } from '../../shared/db/client';
import { keys } from '../../shared/db/keys';
import { disableEndpoint, trackHealth } from '../../shared/webhooks/endpoint-health';
import { beforeFirstTransaction } from '../support/transaction-conflicts';

/** Polls until `fn` passes: a void assertion callback is done once it stops throwing. */
const waitFor = <T>(fn: () => Promise<T> | T, opts?: WaitOptions): Promise<T> =>
  waitUntilTruthy(async () => {
    const v = await fn();
    return (v === undefined ? true : v) as T;
  }, opts);

let rt: TestRuntime;
let rx: DevReceiver;

beforeAll(async () => {
  process.env.WEBHOOK_RETRY_SCALE = '0.001';
  rt = await startTestRuntime();
  rx = await startDevReceiver();
});
afterAll(async () => {
  await rx?.close();
  await rt?.stop();
  delete process.env.WEBHOOK_RETRY_SCALE;
});
afterEach(() => clock.reset());

interface Buyer {
  orgId: string;
  key: string;
  testKey: string;
}

async function signup(): Promise<Buyer> {
  const r = await rt.request('POST', '/v1/auth/signup', { body: { name: 'Hooks Inc', email: `h-${randomUUID()}@example.com` } });
  expect(r.status).toBe(201);
  return { orgId: r.json.organization.id, key: r.json.api_key.secret, testKey: r.json.test_api_key.secret };
}

const post = (path: string, key: string, body: unknown = {}) =>
  rt.request('POST', path, { key, body, headers: { 'Idempotency-Key': randomUUID() } });

async function createEndpoint(b: Buyer, path: string, events: string[] = ['*'], key = b.key) {
  const r = await post('/v1/webhook_endpoints', key, { url: `${rx.url}${path}`, description: 'test receiver', events });
  expect(r.status).toBe(201);
  return r.json as { id: string; secret: string };
}

async function emitEvent(b: Buyer, type: EventType = 'job.completed', env: Env = 'live', data: Record<string, unknown> = { job_id: 'job_x' }) {
  const tx = new Tx();
  const e = emit(tx, { orgId: b.orgId, env, type, data });
  await tx.commit();
  return e;
}

/**
 * The event as GET /v1/webhook_events presents it, read from the table: polling through the API
 * would spend the key's rate limit (D13); each test also checks the route itself once.
 */
async function eventView(_b: Buyer, id: string): Promise<any> {
  const item = await getEvent(id);
  return item ? presentEvent(item) : undefined;
}

async function eventViewViaApi(b: Buyer, id: string) {
  await indexesCaughtUp(); // the event list reads an index
  const r = await rt.request('GET', '/v1/webhook_events?limit=100', { key: b.key });
  expect(r.status).toBe(200);
  return (r.json.data as any[]).find((e) => e.id === id);
}

async function endpointStatus(b: Buyer, id: string): Promise<string | undefined> {
  const out = await db().send(new GetCommand({ TableName: tableName(), Key: keys.webhookEndpoint(b.orgId, 'live', id), ConsistentRead: true }));
  return out.Item?.status as string | undefined;
}

const path = () => `/hook/${randomUUID()}`;

describe('webhook endpoints (D36)', () => {
  it('D36: create answers 201 with the secret once; get and list never show it', async () => {
    const b = await signup();
    const created = await createEndpoint(b, path(), ['job.completed', 'job.completed', 'credits.purchased']);
    expect(created).toMatchObject({ object: 'webhook_endpoint', status: 'enabled', description: 'test receiver', events: ['job.completed', 'credits.purchased'] });
    expect(created.id).toMatch(/^we_[0-9A-Z]{26}$/);
    expect(created.secret).toMatch(/^whsec_/);
    const got = await rt.request('GET', `/v1/webhook_endpoints/${created.id}`, { key: b.key });
    expect(got.status).toBe(200);
    expect(got.json.secret).toBeUndefined();
    const list = await rt.request('GET', '/v1/webhook_endpoints', { key: b.key });
    expect(list.json).toMatchObject({ object: 'list', has_more: false });
    expect(list.json.data.map((e: any) => e.id)).toEqual([created.id]);
    expect(list.json.data[0].secret).toBeUndefined();
  });

  it('D3: an endpoint of the live environment is 404 to the test key and another organization', async () => {
    const b = await signup();
    const other = await signup();
    const ep = await createEndpoint(b, path());
    expect((await rt.request('GET', `/v1/webhook_endpoints/${ep.id}`, { key: b.testKey })).status).toBe(404);
    expect((await rt.request('GET', `/v1/webhook_endpoints/${ep.id}`, { key: other.key })).status).toBe(404);
    expect((await rt.request('GET', '/v1/webhook_endpoints/we_nope', { key: b.key })).status).toBe(404);
  });

  it("D37: a PATCH that leaves the status alone never puts back a failure window a delivery closed meanwhile", async () => {
    const b = await signup();
    const ep = await createEndpoint(b, path());
    const key = keys.webhookEndpoint(b.orgId, 'live', ep.id);
    const item = async () => (await db().send(new GetCommand({ TableName: tableName(), Key: key, ConsistentRead: true }))).Item!;
    // The dispatcher's failures opened a window (it writes failing_since, not updated_at).
    await db().send(new UpdateCommand({ TableName: tableName(), Key: key, UpdateExpression: 'SET failing_since = :t', ExpressionAttributeValues: { ':t': new Date(Date.now() - 4 * DAY_MS).toISOString() } }));
    // Between the PATCH's read and its write, a delivery succeeds and closes it.
    const delivery = beforeFirstTransaction(
      (input) => JSON.stringify(input).includes(ep.id),
      () => db().send(new UpdateCommand({ TableName: tableName(), Key: key, UpdateExpression: 'SET failing_since = :n', ExpressionAttributeValues: { ':n': null } })),
    );
    try {
      expect((await rt.request('PATCH', `/v1/webhook_endpoints/${ep.id}`, { key: b.key, body: { description: 'renamed' } })).status).toBe(200);
    } finally {
      delivery.remove();
    }
    expect(delivery.fired()).toBe(true);
    expect((await item()).failing_since).toBeNull();
  });

  it("D37: status 'enabled' sent again to an enabled endpoint keeps its failure window running; re-enabling a disabled one starts a fresh one", async () => {
    const b = await signup();
    const ep = await createEndpoint(b, path());
    const key = keys.webhookEndpoint(b.orgId, 'live', ep.id);
    const item = async () => (await db().send(new GetCommand({ TableName: tableName(), Key: key, ConsistentRead: true }))).Item!;
    const opened = new Date(Date.now() - 4 * DAY_MS).toISOString();
    await db().send(new UpdateCommand({ TableName: tableName(), Key: key, UpdateExpression: 'SET failing_since = :t', ExpressionAttributeValues: { ':t': opened } }));
    const patch = (body: object) => rt.request('PATCH', `/v1/webhook_endpoints/${ep.id}`, { key: b.key, body });
    expect((await patch({ description: 'whole object sent back', status: 'enabled' })).status).toBe(200);
    expect((await item()).failing_since).toBe(opened);
    expect((await patch({ status: 'disabled' })).status).toBe(200);
    expect((await patch({ status: 'enabled' })).status).toBe(200);
    expect(await item()).toMatchObject({ status: 'enabled', failing_since: null, disabled_reason: null });
  });

  it('D37: an endpoint whose delivery succeeded while a failing attempt was in flight is not disabled for five days of only failures', async () => {
    const b = await signup();
    const ep = await createEndpoint(b, path());
    const key = keys.webhookEndpoint(b.orgId, 'live', ep.id);
    const item = async () => (await db().send(new GetCommand({ TableName: tableName(), Key: key, ConsistentRead: true }))).Item!;
    await db().send(new UpdateCommand({ TableName: tableName(), Key: key, UpdateExpression: 'SET failing_since = :t', ExpressionAttributeValues: { ':t': new Date(Date.now() - 6 * DAY_MS).toISOString() } }));
    const read = await item(); // what the failing attempt read before its receiver timed out
    const success = beforeFirstTransaction(
      (input) => JSON.stringify(input).includes('failing_for_5_days'),
      () => trackHealth(read, true, new Date()),
    );
    try {
      await disableEndpoint(read, 'failing_for_5_days');
    } finally {
      success.remove();
    }
    expect(success.fired()).toBe(true);
    expect(await item()).toMatchObject({ status: 'enabled', failing_since: null });
  });

  it('D36: PATCH changes url, description, events and status; unknown fields are 400', async () => {
    const b = await signup();
    const ep = await createEndpoint(b, path());
    const p = path();
    const r = await rt.request('PATCH', `/v1/webhook_endpoints/${ep.id}`, {
      key: b.key,
      body: { url: `${rx.url}${p}`, description: null, events: ['job.cancelled'], status: 'disabled' },
    });
    expect(r.status).toBe(200);
    expect(r.json).toMatchObject({ url: `${rx.url}${p}`, description: null, events: ['job.cancelled'], status: 'disabled' });
    const bad = await rt.request('PATCH', `/v1/webhook_endpoints/${ep.id}`, { key: b.key, body: { secret: 'x' } });
    expect(bad.status).toBe(400);
    expect(bad.json.error.details[0].field).toBe('secret');
    const badEvent = await rt.request('PATCH', `/v1/webhook_endpoints/${ep.id}`, { key: b.key, body: { events: ['job.exploded'] } });
    expect(badEvent.status).toBe(400);
  });

  it('D43: DELETE answers 204 and the endpoint is gone', async () => {
    const b = await signup();
    const ep = await createEndpoint(b, path());
    const del = await rt.request('DELETE', `/v1/webhook_endpoints/${ep.id}`, { key: b.key });
    expect(del.status).toBe(204);
    expect((await rt.request('GET', `/v1/webhook_endpoints/${ep.id}`, { key: b.key })).status).toBe(404);
  });

  it('D10: create requires an Idempotency-Key and replays the stored response', async () => {
    const b = await signup();
    const body = { url: `${rx.url}${path()}`, events: ['*'] };
    expect((await rt.request('POST', '/v1/webhook_endpoints', { key: b.key, body })).status).toBe(400);
    const k = randomUUID();
    const first = await rt.request('POST', '/v1/webhook_endpoints', { key: b.key, body, headers: { 'Idempotency-Key': k } });
    const again = await rt.request('POST', '/v1/webhook_endpoints', { key: b.key, body, headers: { 'Idempotency-Key': k } });
    expect(again.status).toBe(201);
    expect(again.headers['idempotent-replayed']).toBe('true');
    expect(again.json.id).toBe(first.json.id);
  });

  // D36, D44: refused when saved. The local runtime admits plain loopback names (D44), so this
  // table covers every other range; test/unit/webhooks-ssrf.test.ts covers loopback too.
  it.each([
    ['https://10.0.0.1/hook'],
    ['https://172.16.5.4/hook'],
    ['https://192.168.0.10/hook'],
    ['https://169.254.169.254/latest/meta-data'],
    ['https://100.64.0.1/hook'],
    ['https://0.0.0.0/hook'],
    ['https://[fd00::1]/hook'],
    ['https://[fe80::1]/hook'],
    ['https://[::ffff:169.254.169.254]/hook'],
    ['https://[::ffff:127.0.0.1]/hook'],
    ['https://[::ffff:10.0.0.1]/hook'],
    ['http://93.184.215.14/hook'],
  ])('D36: the SSRF guard refuses %s at save time', async (url) => {
    const b = await signup();
    const r = await post('/v1/webhook_endpoints', b.key, { url, events: ['*'] });
    expect(r.status).toBe(400);
    expect(r.json.error.type).toBe('validation_error');
    expect(r.json.error.details[0].field).toBe('url');
    const ep = await createEndpoint(b, path());
    const patched = await rt.request('PATCH', `/v1/webhook_endpoints/${ep.id}`, { key: b.key, body: { url } });
    expect(patched.status).toBe(400);
  });
});

describe('webhook delivery (D37, D38, D48)', () => {
  it('D37: a delivery verifies by plain HMAC and by the standardwebhooks library, and D38 lists it as delivered', async () => {
    const b = await signup();
    const p = path();
    const ep = await createEndpoint(b, p);
    const e = await emitEvent(b, 'job.completed', 'live', { job_id: 'job_1', files_approved: 3, files_needed: 3, total_worker_payout_cents: 240 });
    const [got] = await waitFor(() => {
      expect(rx.at(p)).toHaveLength(1);
      return rx.at(p);
    });
    const h = got!.headers as Record<string, string>;
    expect(h['webhook-id']).toBe(e.id);
    expect(h['x-service-signature']).toBe(createHmac('sha256', ep.secret).update(got!.rawBody).digest('hex'));
    expect(new Webhook(ep.secret).verify(got!.rawBody, h)).toEqual(e);
    expect(verifyWebhook(got!.rawBody, h, ep.secret).id).toBe(e.id);
    expect(JSON.parse(got!.rawBody)).toEqual(e); // the D35 envelope, byte for byte what was signed
    await waitFor(async () => {
      const v = await eventView(b, e.id);
      expect(v.delivery_status).toBe('delivered');
      expect(v.deliveries).toEqual([
        { endpoint_id: ep.id, status: 'delivered', attempts: 1, last_status_code: 200, last_attempt_at: expect.any(String), last_error: null, next_attempt_at: null },
      ]);
    });
    expect(await eventViewViaApi(b, e.id)).toMatchObject({ id: e.id, delivery_status: 'delivered', deliveries: [{ endpoint_id: ep.id, attempts: 1 }] });
    await indexesCaughtUp();
    const delivered = await rt.request('GET', '/v1/webhook_events?delivery_status=delivered&type=job.completed', { key: b.key });
    expect(delivered.json.data.map((x: any) => x.id)).toEqual([e.id]);
  });

  it('D37: only enabled endpoints subscribed to the type receive it, in the event environment only', async () => {
    const b = await signup();
    const [pAll, pOther, pOff, pTest] = [path(), path(), path(), path()];
    await createEndpoint(b, pAll, ['credits.purchased']);
    await createEndpoint(b, pOther, ['job.cancelled']);
    const off = await createEndpoint(b, pOff, ['*']);
    await rt.request('PATCH', `/v1/webhook_endpoints/${off.id}`, { key: b.key, body: { status: 'disabled' } });
    await createEndpoint(b, pTest, ['*'], b.testKey);
    const e = await emitEvent(b, 'credits.purchased', 'live', { checkout_session_id: 'cs_1', amount_cents: 1000, bonus_cents: 0, total_credits_cents: 1000 });
    await waitFor(() => expect(rx.at(pAll).map((r) => r.event.id)).toEqual([e.id]));
    await waitFor(async () => expect((await eventView(b, e.id)).delivery_status).toBe('delivered'));
    expect(rx.at(pOther)).toHaveLength(0);
    expect(rx.at(pOff)).toHaveLength(0);
    expect(rx.at(pTest)).toHaveLength(0);
  });

  it('D37: a receiver answering 500 twice then 200 gets the event on the third attempt with the same id', async () => {
    const b = await signup();
    const p = path();
    const ep = await createEndpoint(b, p);
    rx.script(p, [500, 500, 200]);
    const e = await emitEvent(b);
    await waitFor(() => expect(rx.at(p)).toHaveLength(3), { timeoutMs: 20_000 });
    const got = rx.at(p);
    expect(new Set(got.map((r) => r.headers['webhook-id']))).toEqual(new Set([e.id]));
    expect(got.every((r) => r.event.id === e.id)).toBe(true);
    // D48: each attempt is signed at send time, and each verifies.
    for (const r of got) expect(() => new Webhook(ep.secret).verify(r.rawBody, r.headers as Record<string, string>)).not.toThrow();
    await waitFor(async () => {
      const v = await eventView(b, e.id);
      expect(v.delivery_status).toBe('delivered');
      expect(v.deliveries[0]).toMatchObject({ status: 'delivered', attempts: 3, last_status_code: 200 });
    });
  });

  it('D38: an event older than 30 days is neither listed nor replayable, though DynamoDB has not deleted it yet', async () => {
    const b = await signup();
    clock.set(new Date(Date.now() - 31 * DAY_MS));
    let old: { id: string };
    try {
      old = await emitEvent(b, 'job.created');
    } finally {
      clock.reset();
    }
    const recent = await emitEvent(b, 'job.cancelled');
    expect(await getEvent(old.id)).toBeDefined(); // still in the table: the TTL deletes late
    // The list reads an index, and the deliveries keep updating the event: wait until it is listed.
    const listed = await waitFor(async () => {
      const r = await rt.request('GET', '/v1/webhook_events?limit=100', { key: b.key });
      return r.json.data.some((e: { id: string }) => e.id === recent.id) ? r : null;
    }, { intervalMs: 1000 }); // within the key's rate limit (D13)
    expect(listed!.json.data.map((e: { id: string }) => e.id)).toEqual([recent.id]);
    const since = await rt.request('GET', `/v1/webhook_events?limit=100&created_after=${new Date(Date.now() - 40 * DAY_MS).toISOString()}`, { key: b.key });
    expect(since.json.data.map((e: { id: string }) => e.id)).toEqual([recent.id]);
    expect((await post(`/v1/webhook_events/${old.id}/replay`, b.key)).status).toBe(404);
  });

  it('D38: while retrying, the delivery is pending with its attempts, last status code and next attempt', async () => {
    const b = await signup();
    const p = path();
    await createEndpoint(b, p);
    // D37: Retry-After on 429/503 is honoured (the scale factor shrinks only our own schedule).
    rx.script(p, [{ status: 503, headers: { 'Retry-After': '2' } }, 200]);
    const e = await emitEvent(b);
    const v = await waitFor(async () => {
      const x = await eventView(b, e.id);
      expect(x.delivery_status).toBe('pending');
      expect(x.deliveries[0]).toMatchObject({ status: 'pending', attempts: 1, last_status_code: 503 });
      return x;
    });
    // The next attempt is planned no earlier than Retry-After, though the scaled schedule says 5 ms.
    const item = await getEvent(e.id);
    const d = (item!.deliveries as any)[v.deliveries[0].endpoint_id];
    expect(Date.parse(d.next_attempt_at) - Date.parse(d.last_attempt_at)).toBeGreaterThanOrEqual(2000);
    await indexesCaughtUp();
    const pending = await rt.request('GET', '/v1/webhook_events?delivery_status=pending', { key: b.key });
    expect(pending.json.data.map((x: any) => x.id)).toEqual([e.id]);
    await waitFor(async () => expect((await eventView(b, e.id)).delivery_status).toBe('delivered'), { timeoutMs: 20_000 });
    expect(rx.at(p)).toHaveLength(2);
  });

  it('D37: 410 disables the endpoint and fails the delivery; later events are not sent to it', async () => {
    const b = await signup();
    const p = path();
    const ep = await createEndpoint(b, p);
    rx.script(p, [410]);
    const e = await emitEvent(b);
    await waitFor(async () => {
      const v = await eventView(b, e.id);
      expect(v.delivery_status).toBe('failed');
      expect(v.deliveries[0]).toMatchObject({ status: 'failed', attempts: 1, last_status_code: 410, next_attempt_at: null });
    });
    await waitFor(async () => expect(await endpointStatus(b, ep.id)).toBe('disabled'));
    await indexesCaughtUp();
    const failed = await rt.request('GET', '/v1/webhook_events?delivery_status=failed', { key: b.key });
    expect(failed.json.data.map((x: any) => x.id)).toEqual([e.id]);
    const later = await emitEvent(b);
    await waitFor(async () => expect((await eventView(b, later.id)).delivery_status).toBe('delivered')); // nothing to deliver
    expect(rx.at(p)).toHaveLength(1);
    const audit = await rt.request('GET', '/v1/audit-events?event_type=webhook_endpoint.disabled', { key: b.key });
    expect(audit.json.data[0]).toMatchObject({ actor: { type: 'system' }, resource: { id: ep.id }, data: { reason: 'gone' } });
  });

  it('D38: a failed delivery says in the event list why it failed (last_error) and when its last attempt was made', async () => {
    const b = await signup();
    const p = path();
    const ep = await createEndpoint(b, p);
    rx.script(p, [410]);
    const e = await emitEvent(b);
    await waitFor(async () => expect((await eventView(b, e.id)).delivery_status).toBe('failed'));
    const listed = await eventViewViaApi(b, e.id);
    expect(listed.deliveries).toEqual([
      { endpoint_id: ep.id, status: 'failed', attempts: 1, last_status_code: 410, last_attempt_at: expect.any(String), last_error: 'http_410', next_attempt_at: null },
    ]);
    expect(Date.parse(listed.deliveries[0].last_attempt_at)).toBeGreaterThanOrEqual(Date.parse(e.created_at));
  });

  it('D37: five days of only failures disables the endpoint', async () => {
    const b = await signup();
    const p = path();
    const ep = await createEndpoint(b, p);
    rx.script(p, [500]);
    const first = await emitEvent(b);
    await waitFor(async () => expect((await eventView(b, first.id)).deliveries[0]?.attempts).toBeGreaterThanOrEqual(1));
    clock.advance(5 * DAY_MS + 60_000);
    await emitEvent(b);
    await waitFor(async () => expect(await endpointStatus(b, ep.id)).toBe('disabled'), { timeoutMs: 20_000 });
  });

  it('D37: replay re-delivers a failed event with the same event id, freshly signed (D48)', async () => {
    const b = await signup();
    const p = path();
    const ep = await createEndpoint(b, p);
    rx.script(p, [410, 200]);
    const e = await emitEvent(b);
    await waitFor(async () => expect((await eventView(b, e.id)).delivery_status).toBe('failed'));
    // Nothing enabled to replay to: 409.
    await waitFor(async () => expect(await endpointStatus(b, ep.id)).toBe('disabled'));
    expect((await post(`/v1/webhook_events/${e.id}/replay`, b.key)).status).toBe(409);
    // Naming an endpoint: one that is not this organization's is 400 on the field; a disabled one 409 with its code.
    const unknown = await post(`/v1/webhook_events/${e.id}/replay`, b.key, { endpoint_id: 'we_nope' });
    expect([unknown.status, unknown.json.error.details?.[0]?.field]).toEqual([400, 'endpoint_id']);
    const disabled = await post(`/v1/webhook_events/${e.id}/replay`, b.key, { endpoint_id: ep.id });
    expect([disabled.status, disabled.json.error.details?.[0]?.code]).toEqual([409, 'endpoint_not_subscribed']);
    await rt.request('PATCH', `/v1/webhook_endpoints/${ep.id}`, { key: b.key, body: { status: 'enabled' } });
    const r = await post(`/v1/webhook_events/${e.id}/replay`, b.key);
    expect(r.status).toBe(202);
    expect(r.json).toMatchObject({ id: e.id, object: 'event', delivery_status: 'pending' });
    await waitFor(() => expect(rx.at(p)).toHaveLength(2));
    const [a1, a2] = rx.at(p);
    expect(a2!.headers['webhook-id']).toBe(e.id);
    expect(a2!.rawBody).toBe(a1!.rawBody);
    expect(() => new Webhook(ep.secret).verify(a2!.rawBody, a2!.headers as Record<string, string>)).not.toThrow();
    await waitFor(async () => {
      const v = await eventView(b, e.id);
      expect(v.delivery_status).toBe('delivered');
      expect(v.deliveries[0]).toMatchObject({ status: 'delivered', attempts: 2, last_status_code: 200 });
    });
    // Another organization cannot replay it (404).
    const other = await signup();
    expect((await post(`/v1/webhook_events/${e.id}/replay`, other.key)).status).toBe(404);
  });

  it('D37: after rotate_secret both secrets verify for 24 h, then only the new one (injectable clock)', async () => {
    const b = await signup();
    const p = path();
    const ep = await createEndpoint(b, p);
    const rot = await post(`/v1/webhook_endpoints/${ep.id}/rotate_secret`, b.key);
    expect(rot.status).toBe(200);
    expect(rot.json.secret).toMatch(/^whsec_/);
    expect(rot.json.secret).not.toBe(ep.secret);
    const fresh = rot.json.secret as string;

    clock.advance(23 * HOUR_MS);
    const e1 = await emitEvent(b);
    const d1 = await waitUntilTruthy(() => rx.at(p).find((r) => r.event.id === e1.id));
    const h1 = d1.headers as Record<string, string>;
    const at1 = new Date(Number(h1['webhook-timestamp']) * 1000);
    expect(h1["webhook-signature"]!.split(' ')).toHaveLength(2);
    for (const s of [ep.secret, fresh]) {
      expect(verifyWebhook(d1.rawBody, h1, s, { now: at1 }).id).toBe(e1.id);
      expect(createHmac('sha256', s).update(d1.rawBody).digest('hex')).toBe(s === fresh ? h1['x-service-signature'] : h1['x-service-signature-previous']);
    }

    clock.advance(HOUR_MS + 1000);
    const e2 = await emitEvent(b);
    const d2 = await waitUntilTruthy(() => rx.at(p).find((r) => r.event.id === e2.id));
    const h2 = d2.headers as Record<string, string>;
    const at2 = new Date(Number(h2['webhook-timestamp']) * 1000);
    expect(h2['x-service-signature-previous']).toBeUndefined();
    expect(verifyWebhook(d2.rawBody, h2, fresh, { now: at2 }).id).toBe(e2.id);
    expect(() => verifyWebhook(d2.rawBody, h2, ep.secret, { now: at2 })).toThrow();
  });

  it('D37: a deleted endpoint gets no more retries; the delivery ends failed', async () => {
    const b = await signup();
    const p = path();
    const ep = await createEndpoint(b, p);
    // The retry waits 5 s: time enough on a loaded machine to delete the endpoint before it runs.
    rx.script(p, [{ status: 429, headers: { 'Retry-After': '5' } }, 200]);
    const e = await emitEvent(b);
    await waitFor(async () => expect((await eventView(b, e.id)).deliveries[0]?.attempts).toBe(1));
    await rt.request('DELETE', `/v1/webhook_endpoints/${ep.id}`, { key: b.key });
    await waitFor(async () => expect((await eventView(b, e.id)).delivery_status).toBe('failed'), { timeoutMs: 20_000 });
    expect(rx.at(p)).toHaveLength(1);
  });
});
