/**
 * D63: the one-off re-seal of webhook endpoint secrets sealed under the one shared encryption
 * context (scripts/reseal-endpoint-secrets.ts), on the local runtime's table and keyring.
 */
import { GetCommand, UpdateCommand } from '@aws-sdk/lib-dynamodb';
import { db, tableName } from '../../shared/db/client';
import { keys } from '../../shared/db/keys';
import { localKeyProvider } from '../../shared/secrets/local-keyring';
import { signingSecrets } from '../../shared/webhooks/endpoints';
import { resealEndpointSecrets } from '../../shared/webhooks/reseal';
import { signupBuyer, idemKey } from '../support/buyers';
import { startTestRuntime, type TestRuntime } from '../support/harness';
import { sealedTheOldWay } from '../support/legacy-sealing';
import { startDevReceiver, type DevReceiver } from '../../shared/webhooks/dev-receiver';

let rt: TestRuntime;
let rx: DevReceiver;
beforeAll(async () => {
  rt = await startTestRuntime({ enablePollers: false });
  rx = await startDevReceiver();
});
afterAll(async () => {
  await rx?.close();
  await rt?.stop();
});

const endpointItem = async (orgId: string, id: string) => (await db().send(new GetCommand({ TableName: tableName(), Key: keys.webhookEndpoint(orgId, 'live', id) }))).Item!;

/** A new endpoint whose secrets are then stored the old way: its current one, and a previous one inside its overlap. */
async function endpointSealedTheOldWay(): Promise<{ orgId: string; id: string; secret: string; previous: string }> {
  const b = await signupBuyer(rt);
  const r = await rt.request('POST', '/v1/webhook_endpoints', { key: b.live, body: { url: `${rx.url}/in`, events: ['*'] }, headers: { 'Idempotency-Key': idemKey() } });
  expect(r.status).toBe(201);
  const id = r.json.id as string;
  const previous = 'whsec_cHJldmlvdXMtc2VjcmV0LW9mLXRoZS1lbmRwb2ludA==';
  const aad = `webhook_endpoint:${id}`;
  await db().send(
    new UpdateCommand({
      TableName: tableName(),
      Key: keys.webhookEndpoint(b.orgId, 'live', id),
      UpdateExpression: 'SET secret_sealed = :s, previous_secret_sealed = :p, previous_secret_expires_at = :e',
      ExpressionAttributeValues: {
        ':s': await sealedTheOldWay(localKeyProvider(), r.json.secret, aad),
        ':p': await sealedTheOldWay(localKeyProvider(), previous, aad),
        ':e': new Date(Date.now() + 3_600_000).toISOString(),
      },
    }),
  );
  return { orgId: b.orgId, id, secret: r.json.secret, previous };
}

describe('re-sealing endpoint secrets for their own purpose', () => {
  it('a new endpoint secret is sealed the current way already (s3): nothing to re-seal', async () => {
    const b = await signupBuyer(rt);
    const r = await rt.request('POST', '/v1/webhook_endpoints', { key: b.live, body: { url: `${rx.url}/new`, events: ['*'] }, headers: { 'Idempotency-Key': idemKey() } });
    expect((await endpointItem(b.orgId, r.json.id)).secret_sealed).toMatch(/^s3\./);
  });

  it('a dry run counts the endpoints sealed the old way and changes nothing', async () => {
    const e = await endpointSealedTheOldWay();
    const before = await endpointItem(e.orgId, e.id);
    const report = await resealEndpointSecrets({ dryRun: true });
    expect(report.resealed).toBeGreaterThanOrEqual(1);
    expect(await endpointItem(e.orgId, e.id)).toEqual(before);
    await resealEndpointSecrets(); // leaves the table as the next test expects it
  });

  it('the current and the previous secret are sealed again the current way, and still sign with the same secrets', async () => {
    const e = await endpointSealedTheOldWay();
    expect((await endpointItem(e.orgId, e.id)).secret_sealed).toMatch(/^s2\./);
    const report = await resealEndpointSecrets();
    expect(report).toMatchObject({ resealed: 1, changedMeanwhile: 0 });
    const item = await endpointItem(e.orgId, e.id);
    expect(item.secret_sealed).toMatch(/^s3\./);
    expect(item.previous_secret_sealed).toMatch(/^s3\./);
    expect(await signingSecrets(item, new Date())).toEqual({ current: e.secret, previous: e.previous });
  });

  it('a second run finds nothing left to do', async () => {
    await endpointSealedTheOldWay();
    await resealEndpointSecrets();
    expect(await resealEndpointSecrets()).toMatchObject({ resealed: 0, changedMeanwhile: 0 });
  });
});
