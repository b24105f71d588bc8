/**
 * What the request benches share: a JSON client of a started local runtime, and a live buyer
 * whose rate limit is lifted (an enterprise override) and whose balance is funded.
 */
import { randomBytes } from 'node:crypto';
import { UpdateCommand } from '@aws-sdk/lib-dynamodb';

type Runtime = { url: string };

export type BenchRequest = (method: string, path: string, key: string, body?: unknown, headers?: Record<string, string>) => Promise<any>;

/** Sends one request; a status of 300 or more throws with the body, so a bench never times errors. */
export function benchClient(rt: Runtime): BenchRequest {
  return async (method, path, key, body, headers = {}) => {
    const res = await fetch(`${rt.url}${path}`, {
      method,
      headers: { Authorization: `Bearer ${key}`, ...(body ? { 'Content-Type': 'application/json' } : {}), ...headers },
      body: body ? JSON.stringify(body) : undefined,
    });
    const json = (await res.json()) as any;
    if (res.status >= 300) throw new Error(`${method} ${path}: ${res.status} ${JSON.stringify(json)}`);
    return json;
  };
}

/** Signs a buyer up, lifts its key's rate limit so it never caps a bench, and buys `cents` of credits. */
export async function fundedBuyer(rt: Runtime, cents: number): Promise<{ key: string; orgId: string }> {
  const { db, tableName } = await import('../shared/db/client');
  const { keys } = await import('../shared/db/keys');
  const { confirmCheckout } = await import('../shared/billing');
  const req = benchClient(rt);
  const signup = await fetch(`${rt.url}/v1/auth/signup`, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify({ name: 'Bench', email: `bench-${randomBytes(6).toString('hex')}@example.com` }) });
  const s = (await signup.json()) as any;
  const key: string = s.api_key.secret;
  const orgId: string = s.organization.id;
  await db().send(new UpdateCommand({ TableName: tableName(), Key: keys.organization(orgId), UpdateExpression: 'SET rate_limits = :l', ExpressionAttributeValues: { ':l': { perMinute: 1e6, perHour: 1e7 } } }));
  const cs = await req('POST', '/v1/billing/credits/purchase', key, { amount_cents: cents }, { 'Idempotency-Key': 'bench-purchase' });
  await confirmCheckout(cs.id, { paymentMethod: 'pm_bench', providerRef: cs.id });
  return { key, orgId };
}
