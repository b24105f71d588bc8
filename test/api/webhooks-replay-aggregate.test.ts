/**
 * An event's `delivery_status` is the aggregate of its deliveries, written only from a version no
 * older than the last one written (shared/webhooks/delivery-store.ts). A replay sets it back to
 * `pending`: an aggregate computed before the replay and written after it must not undo that.
 *
 * No pollers and no stream pipe: the replay's attempt stays queued, so the event stays as the
 * replay left it while the late aggregate is written.
 */
import { randomUUID } from 'node:crypto';
import { UpdateCommand } from '@aws-sdk/lib-dynamodb';
import { startTestRuntime, type TestRuntime } from '../support/harness';
import { signupBuyer, idemKey } from '../support/buyers';
import { startDevReceiver, type DevReceiver } from '../../shared/webhooks/dev-receiver';
import { getEvent, writeAggregate } from '../../shared/webhooks/delivery-store';
import { fanOut, fanOutToken } from '../../shared/webhooks/delivery';
import { Tx } from '../../shared/db/tx';
import { emit } from '../../shared/outbox';
import { db, tableName } from '../../shared/db/client';
import { keys } from '../../shared/db/keys';

let rt: TestRuntime;
let rx: DevReceiver;
beforeAll(async () => {
  rt = await startTestRuntime({ enableStreams: false, enablePollers: false });
  rx = await startDevReceiver();
});
afterAll(async () => {
  await rx?.close();
  await rt?.stop();
});

it('an aggregate computed before a replay and written after it leaves the event pending', async () => {
  const buyer = await signupBuyer(rt);
  const r = await rt.request('POST', '/v1/webhook_endpoints', { key: buyer.live, body: { url: `${rx.url}/agg-${randomUUID()}`, events: ['*'] }, headers: { 'Idempotency-Key': idemKey() } });
  expect(r.status).toBe(201);
  const tx = new Tx();
  const eventId = emit(tx, { orgId: buyer.orgId, env: 'live', type: 'job.completed', data: { job_id: 'job_agg' } }).id;
  await tx.commit();
  await fanOut((await getEvent(eventId))!, fanOutToken(randomUUID())); // delivered at once (200)
  const seenBeforeReplay = (await getEvent(eventId))!;
  expect(seenBeforeReplay.delivery_status).toBe('delivered');
  // The aggregate of that version not written yet: its writer is still on its way.
  await db().send(new UpdateCommand({ TableName: tableName(), Key: keys.event(eventId), UpdateExpression: 'SET ds_version = :v', ExpressionAttributeValues: { ':v': Number(seenBeforeReplay.dv) - 1 } }));

  expect((await rt.request('POST', `/v1/webhook_events/${eventId}/replay`, { key: buyer.live, body: {}, headers: { 'Idempotency-Key': idemKey() } })).status).toBe(202);
  await writeAggregate(seenBeforeReplay); // ...and lands now

  expect((await getEvent(eventId))!.delivery_status).toBe('pending');
});
