/**
 * A replay never takes a delivery's automatic retries away (D37): a replay is one more attempt; if
 * it fails while the delivery was still being retried (or not attempted yet), the retries it had
 * left go on. A replay of a delivery that had finished is one attempt and nothing more.
 *
 * No stream pipe: the test runs each event's fan-out itself, so it can put a replay before it.
 */
import { randomUUID } from 'node:crypto';
import { startTestRuntime, waitFor, type TestRuntime } from '../support/harness';
import { signupBuyer, idemKey, type TestBuyer } from '../support/buyers';
import { startDevReceiver, type DevReceiver } from '../../shared/webhooks/dev-receiver';
import { getEvent, type DeliveryEntry } from '../../shared/webhooks/dispatcher';
import { fanOut, fanOutToken } from '../../shared/webhooks/delivery';
import { Tx } from '../../shared/db/tx';
import { emit } from '../../shared/outbox';

let rt: TestRuntime;
let rx: DevReceiver;

beforeAll(async () => {
  process.env.WEBHOOK_RETRY_SCALE = '0.001';
  rt = await startTestRuntime({ enableStreams: false });
  rx = await startDevReceiver();
});
afterAll(async () => {
  await rx?.close();
  await rt?.stop();
  delete process.env.WEBHOOK_RETRY_SCALE;
});

async function setup(tag: string): Promise<{ buyer: TestBuyer; endpointId: string; path: string; eventId: string }> {
  const buyer = await signupBuyer(rt, `Replay ${tag}`);
  const path = `/${tag}-${randomUUID()}`;
  const r = await rt.request('POST', '/v1/webhook_endpoints', { key: buyer.live, body: { url: `${rx.url}${path}`, events: ['*'] }, headers: { 'Idempotency-Key': idemKey() } });
  expect(r.status).toBe(201);
  const tx = new Tx();
  const eventId = emit(tx, { orgId: buyer.orgId, env: 'live', type: 'job.completed', data: { job_id: `job_${tag}` } }).id;
  await tx.commit();
  return { buyer, endpointId: r.json.id as string, path, eventId };
}

const fanOutNow = async (eventId: string) => fanOut((await getEvent(eventId))!, fanOutToken(randomUUID()));
const delivery = async (eventId: string, endpointId: string) => ((await getEvent(eventId))?.deliveries as Record<string, DeliveryEntry> | undefined)?.[endpointId];
const replay = (b: TestBuyer, eventId: string) => rt.request('POST', `/v1/webhook_events/${eventId}/replay`, { key: b.live, body: {}, headers: { 'Idempotency-Key': idemKey() } });

it('a failed replay of a delivery still being retried leaves it pending with its next retry scheduled, and a later retry delivers it', async () => {
  const { buyer, endpointId, path, eventId } = await setup('retrying');
  // The first attempt fails and asks for 5 s; the replay fails and asks for 2 s; the retry succeeds.
  rx.script(path, [{ status: 503, headers: { 'Retry-After': '5' } }, { status: 503, headers: { 'Retry-After': '2' } }, 200]);
  await fanOutNow(eventId);
  expect(await delivery(eventId, endpointId)).toMatchObject({ status: 'pending', attempts: 1 });

  expect((await replay(buyer, eventId)).status).toBe(202);
  const afterReplay = await waitFor(async () => {
    const d = await delivery(eventId, endpointId);
    return d && d.attempts === 2 ? d : null;
  });
  // Still at the first retry of the schedule: the replay used none of them. The attempt it planned
  // is a retry, not a replay (what a restart re-enqueues from the entry).
  expect(afterReplay).toMatchObject({ status: 'pending', last_status_code: 503, retry_index: 1, next_replay: false });
  expect(Date.parse(afterReplay.next_attempt_at!) - Date.parse(afterReplay.last_attempt_at!)).toBeGreaterThanOrEqual(2_000);

  await waitFor(async () => (await delivery(eventId, endpointId))?.status === 'delivered', { timeoutMs: 20_000 });
  expect(await delivery(eventId, endpointId)).toMatchObject({ attempts: 3, last_status_code: 200, next_attempt_at: null });
  expect(rx.at(path).map((r) => r.event.id)).toEqual([eventId, eventId, eventId]);
});

it('a replay before the fan-out: the fan-out leaves the delivery to the replay, and a failed replay is still retried', async () => {
  const { buyer, endpointId, path, eventId } = await setup('early');
  rx.script(path, [503, 200]);
  expect((await replay(buyer, eventId)).status).toBe(202);
  await fanOutNow(eventId); // finds the delivery the replay claimed: sends nothing
  await waitFor(async () => (await delivery(eventId, endpointId))?.status === 'delivered', { timeoutMs: 20_000 });
  expect(await delivery(eventId, endpointId)).toMatchObject({ attempts: 2, last_status_code: 200 });
  expect(rx.at(path)).toHaveLength(2);
});

it('a failed replay of a delivery that had finished is one attempt: it ends failed, with no retry', async () => {
  const { buyer, endpointId, path, eventId } = await setup('finished');
  rx.script(path, [200, 503, 200]);
  await fanOutNow(eventId);
  expect(await delivery(eventId, endpointId)).toMatchObject({ status: 'delivered', attempts: 1 });
  expect((await replay(buyer, eventId)).status).toBe(202);
  await waitFor(async () => (await delivery(eventId, endpointId))?.status === 'failed');
  expect(await delivery(eventId, endpointId)).toMatchObject({ attempts: 2, last_status_code: 503, next_attempt_at: null });
  expect(rx.at(path)).toHaveLength(2);
});
